package engine

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any of them leaves a goroutine
// running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hangGuard bounds the tests' waits outside a synctest bubble. It is no
// timing assertion: reaching it means the test is stuck, which fails it
// instead of hanging it.
const hangGuard = 2 * time.Minute

// recv receives from ch, failing the test when nothing comes within
// hangGuard.
func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangGuard):
		t.Fatalf("nothing received within %v: the test is stuck", hangGuard)
	}
	var zero T
	return zero
}
