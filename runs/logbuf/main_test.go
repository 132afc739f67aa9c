package logbuf_test

import (
	"testing"

	"github.com/oecp/oecp/internal/testkit"
)

// TestMain fails the package's tests when any of them leaves a goroutine
// running.
func TestMain(m *testing.M) { testkit.Main(m) }
