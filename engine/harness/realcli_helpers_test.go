package harness_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/engine/harness/sandbox/sandboxtest"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/modelapi"
	"github.com/oecp/oecp/internal/testkit"
)

const (
	codexOld     = modelapi.CodexOld
	codexNew     = modelapi.CodexNew
	claudeCLIVer = modelapi.ClaudeVersion
)

// codexVersions are the Codex versions every Codex test runs against.
var codexVersions = modelapi.CodexVersions

// agentCLI is the path of an installed CLI, or the test skips.
func agentCLI(t *testing.T, name, version string) string {
	t.Helper()
	return modelapi.CLI(t, name, version)
}

// realCLIBound bounds one execution of a real CLI, so that a CLI that
// went elsewhere (and retries there for minutes) fails its test as a
// timeout instead of hanging it; no assertion depends on it.
const realCLIBound = 2 * time.Minute

// realCLI is one real CLI behind a harness entry, run in a fresh git
// workspace with a runtime directory.
type realCLI struct {
	t       *testing.T
	harness string
	work    string
	run     string
	entry   map[string]any
	usage   *usageTally
	maxUSD  float64
	// provider is the plan's provider ("": the harness's own).
	provider string
	runner   *harness.Runner
}

// newRealCodex is Codex version at baseURL, allowed CODEX_API_KEY.
func newRealCodex(t *testing.T, version, baseURL string) *realCLI {
	t.Setenv("CODEX_API_KEY", "sk-test-codex")
	return newRealCLI(t, "codex", map[string]any{"argv": []string{agentCLI(t, "codex", version)}, "env": []string{"CODEX_API_KEY"}, "baseUrl": baseURL})
}

// newRealClaude is Claude Code at baseURL, allowed ANTHROPIC_API_KEY and
// CLAUDE_CODE_MAX_RETRIES (1 unless a test sets it: its retries back off
// for seconds).
// newRealCodexOpenRouter is Codex version on the openrouter provider at
// baseURL, allowed OPENROUTER_API_KEY.
func newRealCodexOpenRouter(t *testing.T, version, baseURL string) *realCLI {
	t.Setenv("OPENROUTER_API_KEY", "sk-or-test")
	c := newRealCLI(t, "codex", map[string]any{"argv": []string{agentCLI(t, "codex", version)}, "env": []string{"OPENROUTER_API_KEY"}, "baseUrl": baseURL})
	c.provider = "openrouter"
	return c
}

func newRealClaude(t *testing.T, baseURL string) *realCLI {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test")
	if os.Getenv("CLAUDE_CODE_MAX_RETRIES") == "" {
		t.Setenv("CLAUDE_CODE_MAX_RETRIES", "1")
	}
	return newRealCLI(t, "claude", map[string]any{"argv": []string{agentCLI(t, "claude-code", claudeCLIVer)},
		"env": []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_MAX_RETRIES"}, "baseUrl": baseURL})
}

func newRealCLI(t *testing.T, name string, entry map[string]any) *realCLI {
	dir := t.TempDir()
	c := &realCLI{t: t, harness: name, work: filepath.Join(dir, "work"), run: filepath.Join(dir, "runtime"), entry: entry, usage: &usageTally{}}
	for _, d := range []string{c.work, c.run} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c.write("README.md", "a workspace\n")
	return c
}

// write puts a file into the workspace.
func (c *realCLI) write(name, content string) {
	c.t.Helper()
	p := filepath.Join(c.work, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

func (c *realCLI) read(name string) string {
	c.t.Helper()
	return testkit.ReadFile(c.t, filepath.Join(c.work, name))
}

// get is the runner (built once) over the entry.
func (c *realCLI) get() *harness.Runner {
	c.t.Helper()
	if c.runner == nil {
		b, _ := json.Marshal(map[string]any{c.harness: c.entry})
		cfg, err := harness.Parse("harness.json", b)
		if err != nil {
			c.t.Fatal(err)
		}
		cfg.SetAccounting(c.usage, c.maxUSD)
		if c.runner, err = cfg.Runner(c.harness); err != nil {
			c.t.Fatal(err)
		}
		c.runner.Confine(c.sandbox(cfg))
	}
	return c.runner
}

// sandbox is the agent sandbox the CLI runs in as a root server has it
// (where the host has one; sandboxtest.Host says otherwise): the test's
// directory and the user's home, where the CLIs are installed, are
// hidden, the CLIs' installations shown read-only, and the port of the
// entry's baseUrl reachable on the host's loopback. The run's writer
// identity ends with the test.
func (c *realCLI) sandbox(cfg *harness.Config) *sandbox.Host {
	c.t.Helper()
	var ports []int
	if base, _ := c.entry["baseUrl"].(string); base != "" {
		if u, err := url.Parse(base); err == nil {
			if p, err := strconv.Atoi(u.Port()); err == nil {
				ports = append(ports, p)
			}
		}
	}
	hide := []string{filepath.Dir(c.work)}
	if home, err := os.UserHomeDir(); err == nil {
		hide = append(hide, home)
	}
	h := sandboxtest.Host(c.t, sandbox.Config{Hide: hide, Programs: cfg.Programs(), AllowPorts: ports})
	c.t.Cleanup(func() { h.CloseRun(realRunID) })
	return h
}

// realRunID is the run every real-CLI execution belongs to.
const realRunID = "run-1"

// verified runs textStep once as exec does and fails the test unless the
// outcome is verified; it returns the execution's lines.
func (c *realCLI) verified(model string) *recorder {
	c.t.Helper()
	s, rec := c.exec(model)
	if s != wantVerified {
		c.t.Fatalf("outcome %s\n%s", s, rec.text())
	}
	return rec
}

// refused runs textStep once as exec does against a provider that
// refuses the key, and fails the test unless the turn ends refused with
// no answer, a line naming the 401, after at most three model calls
// (calls counts them).
func (c *realCLI) refused(model string, calls func() int) {
	c.t.Helper()
	s, rec := c.exec(model)
	if s != wantAuthFail || rec.contains("info: {") {
		c.t.Fatalf("outcome %s\n%s", s, rec.text())
	}
	if calls() > 3 || !rec.contains("401") {
		c.t.Fatalf("%d calls before the refusal; lines:\n%s", calls(), rec.text())
	}
}

// exec runs textStep once (model and env from the entry) and returns the
// outcome's JSON and the execution's lines.
func (c *realCLI) exec(model string) (string, *recorder) {
	c.t.Helper()
	rec := &recorder{}
	var env []string
	for _, n := range c.entry["env"].([]string) {
		env = append(env, n)
	}
	provider := c.provider
	switch {
	case provider != "":
	case c.harness == "claude":
		provider = "anthropic"
	default:
		provider = "openai"
	}
	job := harness.Job{Key: realRunID, Instance: "1", Execution: "1", Node: textStep(c.t),
		Binding: harness.Binding{Model: model, Env: env}, Provider: provider, Dir: c.work, Runtime: c.run}
	ctx, cancel := context.WithTimeout(context.Background(), realCLIBound)
	defer cancel()
	out := c.get().Run(ctx, job, worker.Execution{Ref: "ex-1", Node: "write", Attempt: 1, Input: json.RawMessage(`{"text":"draft"}`), Sinks: rec.sinks()})
	return outcome(out), rec
}

// usageTally is a harness.UsageObserver summing what it saw.
type usageTally struct {
	mu    sync.Mutex
	total harness.Usage
	keys  []string // "harness/model" per report
}

func (u *usageTally) AgentUsage(h, model string, us harness.Usage) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.total = u.total.Plus(us)
	u.keys = append(u.keys, h+"/"+model)
}

func (u *usageTally) sum() harness.Usage {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.total
}

// contains reports whether any recorded line contains part.
func (r *recorder) contains(part string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if strings.Contains(l, part) {
			return true
		}
	}
	return false
}

const (
	answerBetter  = `{"text":"better"}`
	wantAuthFail  = `{"status":"error","code":"refusal","reason":"authentication_required"}`
	wantPolicyOff = `{"status":"error","code":"refusal","reason":"policy_denied"}`
)
