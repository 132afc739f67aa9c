package harness

import (
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"

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
	return r.sandbox.Start(sandbox.Spec{Run: job.Key, Workspace: job.Dir, GitDir: job.GitDir, Objects: job.Objects, Home: home,
		Verifier: verifier})
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

// Commands lists each harness entry's program (argv[0]), which the
// sandbox must show its agents.
func (c *Config) Commands() []string {
	var out []string
	for _, name := range c.Names() {
		if argv := c.entries[name].Argv; len(argv) > 0 {
			out = append(out, argv[0])
		}
	}
	return out
}

// GatewayPorts lists the ports of the harness entries' baseUrls that
// name this host's loopback (127.0.0.0/8, ::1, localhost): a model
// gateway the operator declared there is reached from inside the agent
// sandbox, whose loopback is otherwise its own. A baseUrl without a port
// uses its scheme's (80, 443).
func (c *Config) GatewayPorts() []int {
	var out []int
	for _, name := range c.Names() {
		if p, ok := loopbackPort(c.entries[name].BaseURL); ok && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// loopbackPort is the port of a loopback http(s) URL.
func loopbackPort(raw string) (int, bool) {
	u, err := url.Parse(raw)
	if raw == "" || err != nil {
		return 0, false
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return 0, false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	n, err := strconv.Atoi(port)
	return n, err == nil && n > 0 && n <= 65535
}
