package sandbox

import (
	"context"
	"testing"

	"github.com/oecp/oecp/engine/worker"
)

// BenchmarkConfinedTrue runs /bin/true in an execution's sandbox, one
// process after another: what the sandbox adds to each process an agent
// turn starts.
func BenchmarkConfinedTrue(b *testing.B) {
	h, err := New(Config{NetworksAhead: -1})
	if err != nil {
		b.Skipf("needs the agent sandbox: %v", err)
	}
	b.Cleanup(h.Close)
	ws := b.TempDir()
	defer h.CloseRun("r")
	e, err := h.Start(Spec{Run: "r", Workspace: ws})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	b.ResetTimer()
	for range b.N {
		res := worker.Process{Argv: []string{"/bin/true"}, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"}, MaxStdout: 1 << 16, Confine: e.Confine}.Run(context.Background())
		if res.StartErr != nil || res.Exit != nil {
			b.Fatal(res.StartErr, res.Exit)
		}
	}
}
