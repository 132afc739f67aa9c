package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/internal/testkit"
)

// The native example (examples/native) and a one-step native graph whose
// codex agent writes "tick N" lines until it is stopped.
const (
	exampleGraph   = "../../examples/native/review-loop.json"
	exampleRuntime = "../../examples/native/runtime.json"
	exampleInput   = "@../../examples/native/review-loop.input.json"
	exampleHarness = "../../examples/native/harness.json"
	stepGraph      = "testdata/native-step.json"
	stepRuntime    = "testdata/native-step.runtime.json"
	testSource     = "acme/widgets@main:0123456789abcdef0123456789abcdef01234567"
)

// exampleServer serves native runs with nativeHarness.
func exampleServer(t *testing.T) *testServer {
	t.Helper()
	return startServer(t, "--harness", nativeHarness(t))
}

// nativeHarness writes a harness file: the example's, its agent built into
// a temporary directory in place of /tmp/oecp-echo-agent, plus a codex
// harness that ticks until stopped.
func nativeHarness(t *testing.T) string {
	t.Helper()
	// The agents are installed world-readable, so that they run in the
	// agent sandbox under any UID.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(dir, "echo-agent")
	build := exec.Command("go", "build", "-o", agent, "./examples/native/echoagent")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build the echo agent: %v\n%s", err, out)
	}
	var h map[string]struct {
		Driver string   `json:"driver"`
		Argv   []string `json:"argv"`
	}
	data, err := os.ReadFile(exampleHarness)
	if err != nil || json.Unmarshal(data, &h) != nil || len(h["claude"].Argv) != 1 || h["claude"].Argv[0] != "/tmp/oecp-echo-agent" {
		t.Fatalf("%s does not run /tmp/oecp-echo-agent as the README says: %s %v", exampleHarness, data, err)
	}
	ticker := filepath.Join(dir, "tick.sh")
	// Once the file tick.sh.answer exists, a turn answers null at once.
	script := "read -r _ || true\nif [ -e \"$0.answer\" ]; then echo '{\"session\":\"s\",\"text\":\"null\"}'; exit 0; fi\n" +
		"i=0\nwhile :; do i=$((i+1)); echo \"tick $i\" >&2; /bin/sleep 0.1; done\n"
	if err := os.WriteFile(ticker, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "harness.json")
	cfg := fmt.Sprintf(`{"claude":{"driver":%q,"argv":[%q]},"codex":{"driver":"command","argv":["/bin/sh",%q]}}`, h["claude"].Driver, agent, ticker)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestCLIRunExample runs the README's native example end to end through
// the built binary: submit --watch succeeds, and list, status, logs and
// watch show the finished run; the same submit again answers that run.
func TestCLIRunExample(t *testing.T) {
	srv := exampleServer(t)
	submit := []string{"run", "submit", "-f", exampleGraph, "--runtime", exampleRuntime, "--input", exampleInput, "--source", testSource}
	r := oecp(t, srv, append(submit, "--watch")...)
	expect(t, r, 0, []string{
		`"review-loop", source ` + testSource + `, size small`,
		"phase running\n", "draft started (execution ", "review ended (execution ", "phase finished\n",
		"succeeded\n", `output: {"text":"A haiku about Go's goroutines"}`,
	}, nil)
	_, rest, _ := strings.Cut(r.stdout, "submitted: run ")
	id, _, _ := strings.Cut(rest, "\n")
	if _, ok := client.RunIDTime(id); !ok {
		t.Errorf("generated run id %q is not a UUIDv7", id)
	}
	expect(t, oecp(t, srv, submit...), 0, []string{"submitted: run " + id + "\n"}, []string{"already submitted, as run " + id})
	expect(t, oecp(t, srv, "run", "list"), 0, []string{"RUN", "AGE", id + "  review-loop  finished (succeeded)"}, nil)
	expect(t, oecp(t, srv, "run", "status", id), 0, []string{"source:   " + testSource, `result:   succeeded, output {"text":"A haiku about Go's goroutines"}`}, nil)
	expect(t, oecp(t, srv, "run", "logs", id), 0, []string{"info  draft/1: echo-agent: worker node draft (model claude-sonnet-5)", "review/1: echo-agent: verifier node review"}, nil)
	expect(t, oecp(t, srv, "run", "watch", id), 0, []string{"review started", "run " + id + " succeeded"}, nil)
	expect(t, oecp(t, srv, "run", "watch", id, "--timestamps=false", "-o", "wide"), 0, []string{"\nv2:1 phase admitted\n", " draft ended (execution " + id + "/draft/1): succeeded\n"}, nil)
	expect(t, oecp(t, srv, "run", "list", "-o", "wide"), 0, []string{"SOURCE", "  " + testSource + "  small  v2:"}, nil)
	expect(t, oecp(t, srv, "run", "status", id, "-o", "yaml"), 0, []string{"runId: " + id + "\n", "  repository: acme/widgets"}, nil)
	expect(t, oecp(t, nil, "help", "run", "logs"), 0, []string{"usage: oecp run logs ID", "--follow"}, nil)

	// --json: the results and events as the server sent them.
	r = oecp(t, srv, "run", "watch", id, "--json")
	expect(t, r, 0, nil, []string{"run " + id + " succeeded"})
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var last client.RunWatchEvent
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Status.Phase != "finished" || last.Status.TerminalResult.Status != "succeeded" {
		t.Fatalf("last watch event %s: %v", lines[len(lines)-1], err)
	}
	var st client.RunStatusResult
	r = oecp(t, srv, "run", "status", id, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.RunID != id || st.Source.Repository != "acme/widgets" || st.AtCursor != last.Cursor {
		t.Fatalf("status --json %q: %v", r.stdout, err)
	}
}

// TestCLIRunForceAttachLogs follows a run whose agent ticks until it is
// forced: attach by node name streams its output, logs prints the history
// of the unfinished run and exits, force ends it failed, and watch exits 1.
func TestCLIRunForceAttachLogs(t *testing.T) {
	srv := exampleServer(t)
	expect(t, oecp(t, srv, "run", "submit", "-f", stepGraph, "--runtime", stepRuntime, "--source", testSource, "--id", "tick-1", "--title", "ticks"), 0, []string{"submitted: run tick-1\n"}, nil)
	w := startCLI(t, srv, "run", "watch", "tick-1")
	w.waitStdout("work started (execution tick-1/work/1)")
	// After the agent's first log line its output can be attached to.
	l := startCLI(t, srv, "run", "logs", "tick-1", "--follow")
	l.waitStdout("info  work/1: tick ")
	a := startCLI(t, srv, "run", "attach", "tick-1", "work")
	a.waitStderr("attached to execution tick-1/work/1")
	a.waitStdout("tick ")
	expect(t, oecp(t, srv, "run", "logs", "tick-1"), 0, []string{"info  work/1: tick 1\n"}, nil)
	expect(t, oecp(t, srv, "run", "list"), 0, []string{"tick-1  ticks  running  -    work"}, nil)
	expect(t, oecp(t, srv, "run", "status", "tick-1"), 0, []string{"phase:    running", "active:   work (execution tick-1/work/1)"}, nil)

	expect(t, oecp(t, srv, "run", "force", "tick-1"), 0, []string{"force stop recorded for run tick-1", "phase:    stopping"}, nil)
	if code := w.wait(); code != 1 || !strings.Contains(strings.Join(w.seen, "\n"), "run tick-1 failed: force_stopped") {
		t.Errorf("watch exit %d: %q", code, w.seen)
	}
	if !strings.Contains(strings.Join(w.seen, "\n"), "work ended (execution tick-1/work/1): cancelled (a force stop") {
		t.Errorf("watch does not say the forced execution was cancelled: %q", w.seen)
	}
	if code := a.wait(); code != 0 || !strings.Contains(strings.Join(a.seen, "\n"), "[settled]") {
		t.Errorf("attach exit %d: %q", code, a.seen)
	}
	if code := l.wait(); code != 0 {
		t.Errorf("logs --follow exit %d: %q", code, l.seen)
	}
	expect(t, oecp(t, srv, "run", "force", "tick-1"), 0, []string{"run tick-1 had already finished", "result:   failed: force_stopped"}, nil)
	expect(t, oecp(t, srv, "run", "logs", "tick-1", "--execution", "tick-1/work/1"), 0, []string{"info  work/1: tick 1\n"}, nil)
	expect(t, oecp(t, srv, "run", "attach", "tick-1", "tick-1/work/1"), 1, nil, []string{"GONE", "oecp run logs ID --execution"})
	expect(t, oecp(t, srv, "run", "watch", "nope"), 1, nil, []string{"refused: no such run or execution", "oecp run list"})
	expect(t, oecp(t, srv, "run", "watch", "tick-1", "--from", "v2:999999"), 1, nil, []string{"no such cursor"})
}

// TestCLIRunWatchSurvivesRestart: run watch resumes on a restarted server
// (SQLite keeps the run) after the last status it printed, and ends with
// the run's result: the agent's turn the shutdown interrupted runs again
// on the restarted server, answers, and the run succeeds. The watch
// reaches both servers through one relay address.
func TestCLIRunWatchSurvivesRestart(t *testing.T) {
	harness, data := nativeHarness(t), t.TempDir()
	args := []string{"--store", "sqlite", "--data", data, "--harness", harness}
	srv := startServer(t, args...)
	expect(t, oecp(t, srv, "run", "submit", "-f", stepGraph, "--runtime", stepRuntime, "--source", testSource, "--id", "tick-r"), 0, nil, nil)
	r := startRelay(t, srv)
	w := startCLI(t, &testServer{url: "ws://" + r.ln.Addr().String() + "/oecp"}, "run", "watch", "tick-r")
	w.waitStdout("work started (execution tick-r/work/1)")
	if err := srv.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Wait()
	w.waitStderr("the stream was interrupted")
	// Three resumption attempts find no server behind the relay: the
	// watch says it is resuming once, not once per attempt.
	for range 3 {
		testkit.Recv(t, r.failed)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(harness), "tick.sh.answer"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r.point(startServer(t, args...))
	if code := w.wait(); code != 0 || !strings.Contains(strings.Join(w.seen, "\n"), "run tick-r succeeded") {
		t.Fatalf("watch exit %d: %q", code, w.seen)
	}
	if n := strings.Count(strings.Join(w.seen, "\n"), "resuming after"); n != 1 {
		t.Errorf("the watch said it was resuming %d times, want once: %q", n, w.seen)
	}
}

// relay forwards each TCP connection it accepts to the server it points
// at when the connection comes in.
type relay struct {
	ln     net.Listener
	mu     sync.Mutex
	target string // host:port
	// failed gets a value for each connection whose target did not
	// answer (dropped when nobody waits for it).
	failed chan struct{}
}

func startRelay(t *testing.T, srv *testServer) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, failed: make(chan struct{}, 64)}
	r.point(srv)
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); testkit.Wait(t, &wg) })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); r.pipe(c) }()
		}
	}()
	return r
}

func (r *relay) point(srv *testServer) {
	u, err := url.Parse(srv.url)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.target = u.Host
}

// pipe copies both ways until either side ends, then closes both.
func (r *relay) pipe(c net.Conn) {
	defer c.Close()
	r.mu.Lock()
	target := r.target
	r.mu.Unlock()
	s, err := net.Dial("tcp", target)
	if err != nil {
		select {
		case r.failed <- struct{}{}:
		default:
		}
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
	<-done
}

// TestCLIRunSubmitRefusals: what submit says about a bad submission, a
// taken run id and a missing argument.
func TestCLIRunSubmitRefusals(t *testing.T) {
	srv := exampleServer(t)
	submit := []string{"run", "submit", "-f", exampleGraph, "--runtime", exampleRuntime, "--source", testSource}
	expect(t, oecp(t, srv, submit...), 1, nil, []string{"GRAPH_INVALID: initialInput does not match", "fix the submission"})
	bad := filepath.Join(t.TempDir(), "runtime.json")
	if err := os.WriteFile(bad, []byte(`{"harness":"claude","provider":"anthropic","size":"small","nodes":{"draft":{"kind":"agent","model":"gpt-5.6"},"review":{"kind":"agent","model":"claude-haiku-4-5"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, oecp(t, srv, "run", "submit", "-f", exampleGraph, "--runtime", bad, "--input", exampleInput, "--source", testSource), 1, nil, []string{`model "gpt-5.6" is not in the claude catalogue`})
	expect(t, oecp(t, srv, append(submit, "--input", exampleInput, "--id", "one", "--key", "k1")...), 0, []string{"submitted: run one\n"}, nil)
	expect(t, oecp(t, srv, append(submit, "--input", `{"text":"other"}`, "--id", "one")...), 1, nil, []string{"RUN_CONFLICT", "choose another --id"})
	expect(t, oecp(t, srv, append(submit, "--input", `{"text":"other"}`, "--key", "k1")...), 1, nil, []string{"IDEMPOTENCY_REUSE", "names run one"})
	expect(t, oecp(t, srv, append(submit, "--id", "run-7")...), 1, nil, []string{"SCHEMA_VIOLATION", "run-<digits>"})
	expect(t, oecp(t, srv, "run", "submit", "-f", exampleGraph), 2, nil, []string{"--runtime FILE"})
	expect(t, oecp(t, srv, "run", "status"), 2, nil, []string{"missing argument"})
	expect(t, oecp(t, srv, "run", "frobnicate"), 2, nil, []string{`unknown command "frobnicate"`})
	expect(t, oecp(t, srv, "run"), 2, nil, []string{"usage: oecp run <command>", "submit", "force"})
}

// git runs git in dir for a test.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestCLIRunSubmitSourceFromGit: without --source, submit snapshots the git
// checkout it runs in, and refuses naming --source where there is none.
func TestCLIRunSubmitSourceFromGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	srv := exampleServer(t)
	graph, _ := filepath.Abs(stepGraph)
	runtime, _ := filepath.Abs(stepRuntime)
	submit := []string{"run", "submit", "-f", graph, "--runtime", runtime}

	expect(t, oecpIn(t, t.TempDir(), srv, submit...), 2, nil, []string{"no --source, and the current directory is not in a git checkout", "--source OWNER/NAME@BRANCH:REVISION"})
	repo := t.TempDir()
	git(t, repo, "init", "-q", "-b", "feature/x")
	expect(t, oecpIn(t, repo, srv, submit...), 2, nil, []string{"has no commit yet", "--source"})
	git(t, repo, "commit", "-q", "--allow-empty", "-m", "first")
	expect(t, oecpIn(t, repo, srv, submit...), 2, nil, []string{"has no remote named origin", "--source"})
	git(t, repo, "remote", "add", "origin", "git@github.com:acme/widgets.git")
	head := git(t, repo, "rev-parse", "HEAD")
	r := oecpIn(t, repo, srv, append(submit, "--json")...)
	expect(t, r, 0, []string{`"runId":`}, []string{"source acme/widgets@feature/x:" + head})
	var res client.RunSubmitResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	expect(t, oecp(t, srv, "run", "status", res.RunID), 0, []string{"source:   acme/widgets@feature/x:" + head}, nil)
	git(t, repo, "checkout", "-q", "--detach")
	expect(t, oecpIn(t, repo, srv, submit...), 2, nil, []string{"is detached", "--source"})

	for _, bad := range []string{"acme/widgets", "acme@main:" + head, "acme/widgets@main:abc", "acme/widgets@:" + head} {
		expect(t, oecp(t, srv, "run", "submit", "-f", graph, "--runtime", runtime, "--source", bad), 2, nil, []string{"--source " + fmt.Sprintf("%q", bad)})
	}
}
