package sandbox

import (
	"os"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
)

// TestMain fails the package's tests when any of them leaves a goroutine
// running. Started as a helper (loopbackHelperEnv set), the binary is
// that helper instead.
func TestMain(m *testing.M) {
	if os.Getenv(loopbackHelperEnv) == "1" {
		loopbackHelper()
		return
	}
	testkit.Main(m)
}
