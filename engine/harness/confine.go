package harness

import (
	"path/filepath"

	"github.com/oecp/oecp/engine/harness/sandbox"
)

// Confine makes the runner run every agent process in a sandbox of h (nil:
// none) and returns the runner. Whatever h is, an agent process is
// killed when the server dies.
func (r *Runner) Confine(h *sandbox.Host) *Runner {
	r.sandbox = h
	return r
}

// confine prepares the sandbox of one execution: nil when the runner has
// none (its Confine and Close still work).
func (r *Runner) confine(job Job, home string, verifier bool) (*sandbox.Execution, error) {
	return r.sandbox.Start(sandbox.Spec{Run: job.RunID, Workspace: job.Dir, GitDir: job.GitDir, Home: home,
		Scratch: job.Runtime, Verifier: verifier})
}

// Programs lists what the configured harnesses run: each argv[0], and
// every other absolute path in an argv (a script an interpreter runs).
func (c *Config) Programs() []string {
	var out []string
	for _, name := range c.Names() {
		for i, a := range c.entries[name].Argv {
			if i == 0 || filepath.IsAbs(a) {
				out = append(out, a)
			}
		}
	}
	return out
}
