package postgres_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
	"github.com/oecp/oecp/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hangGuard bounds the tests' waits. It is no timing assertion: reaching
// it means the test is stuck, which fails it instead of hanging it.
const hangGuard = 2 * time.Minute

// awaited waits for a value on ch; when none comes within hangGuard it
// reports the test stuck and returns false. It may be called off the
// test's goroutine.
func awaited[T any](t testing.TB, ch <-chan T) bool {
	t.Helper()
	select {
	case <-ch:
		return true
	case <-time.After(hangGuard):
		t.Errorf("nothing received within %v: the test is stuck", hangGuard)
		return false
	}
}

var ctx = context.Background()

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// openOn opens a store on dsn, closed when t ends.
func openOn(t testing.TB, dsn string, opt postgres.Options) *postgres.Store {
	t.Helper()
	opt.DSN = dsn
	s, err := postgres.Open(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// open opens a store on a fresh schema.
func open(t testing.TB, opt postgres.Options) *postgres.Store {
	t.Helper()
	dsn, _ := pgtest.Schema(t)
	return openOn(t, dsn, opt)
}

func TestConformance(t *testing.T) {
	pgtest.Require(t)
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, postgres.Options{}) })
	// The lease suite assumes that a lease held by another owner belongs to
	// a process that is gone (a local store's assumption): a TTL of one
	// microsecond makes every lease expired by the next statement.
	t.Run("Leases", func(t *testing.T) {
		storetest.RunLeases(t, func(t *testing.T) store.Store { return open(t, postgres.Options{LeaseTTL: time.Microsecond}) })
	})
}
