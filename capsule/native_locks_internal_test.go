package capsule

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/workspace"
)

// A finished run's close holds no lock of the agents across a runner's
// close or the sandbox's (which scans /proc): while one is stuck there,
// another execution still finds its runner.
func TestAgentsCloseRunHoldsNoLockAcrossARunner(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ws := workspace.NewManager(t.TempDir(), nil, time.Hour, log)
	defer ws.Close()
	a := &agents{ws: ws, log: log, runners: map[string]*harness.Runner{"h": {}}}
	inClose, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	closeRunner = func(*harness.Runner, string) { once.Do(func() { close(inClose); <-release }) }
	t.Cleanup(func() { closeRunner = (*harness.Runner).CloseRun })
	closed := make(chan struct{})
	go func() {
		a.CloseRun("tenant", "run")
		close(closed)
	}()
	testkit.Recv(t, inClose)
	err := testkit.CompletesWhileHeld(t, release, 30*time.Second, func() error {
		_, err := a.runner("h")
		return err
	}, "finding a runner waited for another run's close")
	testkit.Recv(t, closed)
	if err != nil {
		t.Fatal(err)
	}
}
