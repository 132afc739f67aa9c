package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/engine/harness/sandbox/sandboxtest"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
)

// Graphs: the README's example (echo, succeeds), a run that fails with a
// reason, one that sleeps until stopped (its input is {"ms":N}), and one
// step of the host-configured worker test.ticker@1.
const (
	oneStep   = "../../examples/one-step.json"
	oneInput  = `{"text":"hello"}`
	failGraph = "testdata/fail.json"
	crash     = "../../examples/held/crash.json"
	sleepy    = "testdata/sleep.json"
	ticker    = "testdata/ticker.json"
	// tickerWorkers declares test.ticker@1: "tick N" lines until stopped.
	tickerWorkers = "testdata/ticker-workers.json"
	sleepLong     = `{"ms":3600000}`
)

// testServer is a running `oecp serve` on 127.0.0.1 port 0, and the
// cache directory of the CLI commands run against it.
type testServer struct {
	url   string
	cmd   *exec.Cmd
	cache string
	// logs gets the server's log lines after its URL (dropped when
	// nobody reads them and the buffer is full).
	logs chan string
}

// serverLogBuffer is how many log lines a test server keeps unread.
const serverLogBuffer = 4096

// waitLog reads the server's log until a line contains want.
func (s *testServer) waitLog(t *testing.T, want string) string {
	t.Helper()
	for line := range s.logs {
		if strings.Contains(line, want) {
			return line
		}
	}
	t.Fatalf("the server's log ended without %q", want)
	return ""
}

// writeSecret writes content to path, readable by its owner only (a
// token or a tokens file), and returns path.
func writeSecret(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startServer runs `oecp serve` with extra flags and waits for the line
// that announces its URL.
func startServer(t *testing.T, extra ...string) *testServer {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--store", "memory", "--shutdown-grace", "100ms"}, extra...)
	if slices.Contains(extra, "--harness") && !slices.Contains(extra, "--agent-unconfined") {
		args = append(args, sandboxtest.ServeFlags(t)...)
	}
	cmd := exec.Command(oecpBin, args...)
	stderr := testkit.StartStderr(t, cmd)
	urlc := make(chan string, 1)
	logs := make(chan string, serverLogBuffer)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`url"?[=:]"?(wss?://[^\s"]+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
			select {
			case logs <- sc.Text():
			default:
			}
		}
		close(urlc)
		close(logs)
	}()
	s := &testServer{cmd: cmd, cache: t.TempDir(), logs: logs}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			// What the server logged at WARN and above, and how it ended,
			// say why.
			var last []string
			for line := range logs {
				if strings.Contains(line, "WARN") || strings.Contains(line, "ERROR") {
					t.Logf("server: %s", line)
				}
				last = append(last, line)
			}
			if len(last) > 5 {
				last = last[len(last)-5:]
			}
			t.Logf("server's last lines:\n%s", strings.Join(last, "\n"))
		}
	})
	select {
	case u, ok := <-urlc:
		if !ok {
			t.Fatal("oecp serve exited before announcing its URL")
		}
		s.url = u
	case <-time.After(30 * time.Second):
		t.Fatal("oecp serve did not announce its URL")
	}
	return s
}

type result struct {
	code           int
	stdout, stderr string
}

// oecp runs the CLI against srv (nil: no --server) and returns its output.
func oecp(t *testing.T, srv *testServer, args ...string) result {
	t.Helper()
	return oecpIn(t, "", srv, args...)
}

// oecpIn is oecp in the directory dir ("": the test's).
func oecpIn(t *testing.T, dir string, srv *testServer, args ...string) result {
	t.Helper()
	cmd := exec.Command(oecpBin, args...)
	cmd.Dir = dir
	cmd.Env = cliEnv(srv)
	return runResult(t, cmd)
}

// runResult runs cmd and returns its exit code and output; a command
// that could not run fails the test.
func runResult(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

func cliEnv(srv *testServer) []string {
	// No command of a test starts a local server on the user's data
	// directory (local_server_test.go turns it on where it tests it).
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), noAutoServerEnv + "=1"}
	if srv != nil {
		env = append(env, "OECP_SERVER="+srv.url, "XDG_CACHE_HOME="+srv.cache)
	}
	return env
}

func expect(t *testing.T, r result, code int, stdoutHas, stderrHas []string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range stdoutHas {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
	for _, s := range stderrHas {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
}

func getJSON(t *testing.T, srv *testServer) protocol.GetResult {
	t.Helper()
	r := oecp(t, srv, "get", "--json")
	var g protocol.GetResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &g) != nil {
		t.Fatalf("get --json: %+v", r)
	}
	return g
}

func TestCLIQuickStart(t *testing.T) {
	srv := startServer(t)
	expect(t, oecp(t, srv, "plan", "-f", oneStep), 0, []string{"graph is valid", "termination:         acyclic", "max node executions: 1"}, nil)
	expect(t, oecp(t, srv, "apply", "-f", oneStep, "--input", oneInput, "--dry-run"), 0, []string{"dry run (nothing changed)", "added:   ", "outcome: a new run"}, nil)
	expect(t, oecp(t, srv, "apply", "-f", oneStep, "--input", oneInput, "--watch"), 0, []string{
		"applied: run run-1, generation 1, phase running\n",
		"run run-1 started (generation 1)\n",
		"echo started\n",
		// Step outputs are shown (truncated) on the "finished" line, after
		// the duration when the watch saw the step start.
		"echo finished (verified)",
		`: {"text":"hello"}` + "\n",
		"run run-1 succeeded\n",
		`output: {"text":"hello"}`,
	}, nil)
	expect(t, oecp(t, srv, "get"), 0, []string{"phase:       finished", "generation:  1", "run:         run-1", `result:      succeeded, output {"text":"hello"}`}, nil)
	g := getJSON(t, srv)
	if g.Status.Phase != "finished" || g.TerminalResult == nil || g.TerminalResult.Status != "succeeded" {
		t.Fatalf("get --json = %+v", g)
	}
	// watch of a finished run replays it and exits with its result.
	expect(t, oecp(t, srv, "watch"), 0, []string{"echo finished (verified)", "run run-1 succeeded"}, nil)

	// A run that fails ends with its reason and exit 1.
	expect(t, oecp(t, srv, "delete"), 0, []string{"deleted"}, nil)
	expect(t, oecp(t, srv, "apply", "-f", failGraph, "--input", "null", "--watch"), 1, []string{"work finished (verified)", "run run-2 failed: gave_up"}, nil)
	expect(t, oecp(t, srv, "get"), 0, []string{"result:      failed: gave_up"}, nil)

	// The same idempotency key replays the receipt.
	expect(t, oecp(t, srv, "delete"), 0, nil, nil)
	expect(t, oecp(t, srv, "apply", "-f", oneStep, "--input", oneInput, "--idempotency-key", "k1", "--json"), 0, []string{`"runId":"run-3"`, `"deduped":false`}, nil)
	expect(t, oecp(t, srv, "apply", "-f", oneStep, "--input", oneInput, "--idempotency-key", "k1"), 0, []string{"replayed"}, nil)
}

// TestCLIApplyWatchUntilStopped: apply --watch follows the new run; a stop
// from another process ends it and the watch exits 1 saying so.
func TestCLIApplyWatchUntilStopped(t *testing.T) {
	srv := startServer(t)
	p := startCLI(t, srv, "apply", "-f", sleepy, "--input", sleepLong, "--watch")
	p.waitStdout("nap started")
	expect(t, oecp(t, srv, "stop", "--force"), 0, []string{"stop (force) accepted for run run-1"}, nil)
	p.waitStdout("run run-1 stopped (force)")
	if code := p.wait(); code != exitError {
		t.Fatalf("apply --watch ended with exit %d, want 1; output %q", code, p.seen)
	}
	if p.seen[0] != "applied: run run-1, generation 1, phase running" {
		t.Fatalf("first line %q", p.seen[0])
	}
}

func TestCLILifecycle(t *testing.T) {
	srv := startServer(t)
	expect(t, oecp(t, srv, "update", "--label", "a=b"), 1, nil, []string{"oecp update refused: there is no run — `oecp apply", "INVALID_PHASE, phase empty"})
	expect(t, oecp(t, srv, "apply", "-f", sleepy, "--input", sleepLong), 0, nil, nil)
	// TestCLIRefusalNamesCommand: the CLI's line names the command, the
	// phase in plain words and what to do.
	expect(t, oecp(t, srv, "delete"), 1, nil, []string{"oecp delete refused: the run is still running — `oecp stop` it first\n", "(server: INVALID_PHASE, phase running)"})
	expect(t, oecp(t, srv, "resubmit"), 1, nil, []string{"oecp resubmit refused: the run is still running"})

	expect(t, oecp(t, srv, "update", "--label", "a=b", "--label", "c=d"), 0, []string{"labels a=b, c=d"}, nil)
	expect(t, oecp(t, srv, "update", "--label", "e=f", "--label", "a-", "--log-level", "debug"), 0, []string{"log level debug, labels c=d, e=f"}, nil)
	if l := getJSON(t, srv).Status.Operational.Labels; len(l) != 2 || l["c"] != "d" || l["e"] != "f" {
		t.Fatalf("merged labels %v", l)
	}
	expect(t, oecp(t, srv, "update", "--replace-labels", "--label", "x=y"), 0, []string{"labels x=y"}, nil)
	expect(t, oecp(t, srv, "update", "--replace-labels"), 0, []string{"labels (none)"}, nil)
	expect(t, oecp(t, srv, "update", "--suspend"), 0, []string{"dispatch suspended"}, nil)
	expect(t, oecp(t, srv, "update", "--suspend", "--if-generation", "7"), 1, nil, []string{"GENERATION_CONFLICT", "generation 1"})
	expect(t, oecp(t, srv, "retry"), 1, nil, []string{"oecp retry refused: the run is suspended — `oecp update --resume` first", "(server: INVALID_PHASE, dispatch suspended)"})
	expect(t, oecp(t, srv, "update", "--resume"), 0, []string{"dispatch active"}, nil)
	expect(t, oecp(t, srv, "stop", "--force"), 0, []string{"stop (force) accepted for run run-1: phase finished"}, nil)

	// The run has finished: watch replays it and reports the stop.
	expect(t, oecp(t, srv, "watch"), 1, []string{"run run-1 started (generation 1)", "labels: set a=b, c=d\n", "labels: set e=f; removed a\n", "log level: info → debug\n",
		"labels: set x=y; removed c, e\n", "labels: removed x\n", "phase running, suspended", "phase finished", "run run-1 stopped (force)"}, nil)
	r := oecp(t, srv, "watch", "--json", "--run", "run-1")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for _, l := range lines {
		var ev struct {
			SubscriptionID, RunID, Cursor string
			Event                         map[string]any
		}
		if json.Unmarshal([]byte(l), &ev) != nil || ev.SubscriptionID == "" || ev.RunID != "run-1" || ev.Cursor == "" {
			t.Fatalf("watch --json line %q", l)
		}
	}
	if r.code != 1 || !strings.Contains(lines[len(lines)-1], `"finished"`) || !strings.Contains(r.stderr, "run run-1 stopped (force)") {
		t.Fatalf("watch --json: %+v", r)
	}
	// --from skips what was seen.
	expect(t, oecp(t, srv, "watch", "--from", "cursor-1"), 1, []string{"phase finished"}, nil)
	if r := oecp(t, srv, "watch", "--from", "cursor-1"); strings.Contains(r.stdout, "run run-1 started") || !strings.Contains(r.stdout, "nap started") {
		t.Fatalf("--from replayed the admission: %s", r.stdout)
	}
	expect(t, oecp(t, srv, "watch", "--run", "run-9"), 1, nil, []string{"NOT_FOUND"})
	// TestCLIWatchUnknownFromCursor: a cursor the server does not know is
	// an error, never a replay from the start.
	if r := oecp(t, srv, "watch", "--from", "cursor-999"); r.code != 1 || !strings.Contains(r.stderr, "NOT_FOUND") || r.stdout != "" {
		t.Fatalf("watch --from an unknown cursor: %+v", r)
	}

	expect(t, oecp(t, srv, "resubmit", "--input", "{nope"), 2, nil, []string{"not valid JSON"})
	expect(t, oecp(t, srv, "resubmit", "--input", `{"ms":1}`), 0, []string{"resubmitted: run run-2 replaces run-1"}, nil)
	expect(t, oecp(t, srv, "watch"), 0, []string{"nap finished (verified)", "run run-2 succeeded"}, nil)
	expect(t, oecp(t, srv, "delete", "--if-run", "run-1"), 1, nil, []string{"RUN_CONFLICT", "run-2"})
	expect(t, oecp(t, srv, "delete"), 0, []string{"deleted: the cluster is now empty"}, nil)
	expect(t, oecp(t, srv, "get"), 0, []string{"phase:       empty"}, nil)
	expect(t, oecp(t, srv, "delete"), 0, []string{"nothing to delete"}, nil)
	expect(t, oecp(t, srv, "watch", "--run", "run-1"), 1, nil, []string{"GONE"})
}

func TestCLIBadInput(t *testing.T) {
	srv := startServer(t)
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(notJSON, []byte("{not json"), 0o600)
	invalid := filepath.Join(dir, "invalid.json")
	_ = os.WriteFile(invalid, []byte(`{"profile":"nope"}`), 0o600)

	expect(t, oecp(t, srv, "plan", "-f", filepath.Join(dir, "missing.json")), 2, nil, []string{"read graph", "no such file"})
	expect(t, oecp(t, srv, "apply", "-f", notJSON, "--input", "null"), 2, nil, []string{"not valid JSON"})
	// The wire says only SCHEMA_VIOLATION; the CLI adds where (its own strict decode).
	expect(t, oecp(t, srv, "plan", "-f", invalid), 1, nil, []string{"SCHEMA_VIOLATION", "check the graph file", "invalid.json: $"})
	expect(t, oecp(t, srv, "apply", "-f", invalid, "--input", "null"), 1, nil, []string{"SCHEMA_VIOLATION", "invalid.json: $"})
	expect(t, oecp(t, srv, "apply", "--input", "null"), 2, nil, []string{"-f GRAPH"})
	expect(t, oecp(t, srv, "apply", "-f", oneStep, "--input", "{nope"), 2, nil, []string{"--input", "not valid JSON"})
	expect(t, oecp(t, srv, "get", "--bogus"), 2, nil, []string{"flag provided but not defined", "See 'oecp help get'"})
	expect(t, oecp(t, srv, "get", "extra"), 2, nil, []string{`unexpected argument "extra"`})
	expect(t, oecp(t, srv, "update"), 2, nil, []string{"nothing to update"})
	expect(t, oecp(t, srv, "update", "--label", "novalue"), 2, nil, []string{"key=value"})
	expect(t, oecp(t, srv, "attach"), 2, nil, []string{"EXECUTION"})
	expect(t, oecp(t, srv, "attach", "--node", "echo"), 1, nil, []string{"no current run", "oecp attach EXECUTION"})
	expect(t, oecp(t, srv, "attach", "no-such-execution"), 1, nil, []string{"NOT_FOUND"})

	// Refused URLs: nothing is dialled.
	for _, u := range []string{"http://127.0.0.1:1/oecp", "ws://example.com/oecp", "ws://127.0.0.1:1/oecp?x=1", "wss://u:p@example.com/oecp", "ws:///oecp"} {
		expect(t, oecp(t, nil, "get", "--server", u), 2, nil, []string{"URL refused"})
	}
	// Unreachable server.
	addr := testkit.FreeAddr(t)
	expect(t, oecp(t, nil, "get", "--server", "ws://"+addr+"/oecp"), 2, nil, []string{"cannot talk to the server", "oecp serve"})
	expect(t, oecp(t, nil, "get", "--server", "ws://"+addr+"/oecp", "--token-file", filepath.Join(dir, "none")), 2, nil, []string{"--token-file"})
}

func TestCLIAuthTokens(t *testing.T) {
	dir := t.TempDir()
	toks := writeSecret(t, filepath.Join(dir, "tokens.json"), `[
 {"token":"good-token","principal":"alice","tenant":"t1","expiresAt":"2999-01-01T00:00:00Z"},
 {"token":"old-token","principal":"bob","tenant":"t1","expiresAt":"2000-01-01T00:00:00Z"}]`)
	srv := startServer(t, "--auth-tokens", toks)
	good := writeSecret(t, filepath.Join(dir, "good"), "good-token\n")
	old := writeSecret(t, filepath.Join(dir, "old"), "old-token\n")
	expect(t, oecp(t, srv, "get", "--token-file", good), 0, []string{"phase:"}, nil)
	expect(t, oecp(t, srv, "get", "--token-file", old), 2, nil, []string{"401", "OECP_TOKEN"})
	expect(t, oecp(t, srv, "get"), 2, nil, []string{"401"})

	cmd := exec.Command(oecpBin, "get")
	cmd.Env = append(cliEnv(srv), "OECP_TOKEN=good-token")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("get with OECP_TOKEN: %v %s", err, out)
	}
}

// TestClientOverServeStdio drives every v1 method of the real cluster
// backend through the client library over NDJSON, spawning `oecp serve
// --stdio`.
func TestClientOverServeStdio(t *testing.T) {
	c, err := client.DialCommand(exec.Command(oecpBin, "serve", "--stdio", "--store", "memory"), io.Discard, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	graph, err := os.ReadFile(sleepy)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Initialize(ctx); err != nil || r.ProtocolVersion != protocol.Version {
		t.Fatalf("initialize: %+v %v", r, err)
	}
	if p, err := c.Plan(ctx, graph); err != nil || !p.OK {
		t.Fatalf("plan: %+v %v", p, err)
	}
	zero := int64(0)
	ar, err := c.Apply(ctx, client.ApplyParams{Graph: graph, Input: json.RawMessage(sleepLong), IfGeneration: &zero})
	if err != nil || *ar.RunID != "run-1" {
		t.Fatalf("apply: %+v %v", ar, err)
	}
	sub, wr, err := c.Watch(ctx, client.WatchParams{})
	if err != nil || *wr.RunID != "run-1" {
		t.Fatalf("watch: %+v %v", wr, err)
	}
	ev := testkit.Recv(t, sub.Events())
	if ev.Event.Type != protocol.EventPhase || ev.Event.Admission == nil {
		t.Fatalf("first event %+v", ev)
	}
	if _, err := c.Update(ctx, client.UpdateParams{LogLevel: "debug", IfGeneration: 1}); err != nil {
		t.Fatal(err)
	}
	for ev := range sub.Events() {
		if ev.Event.Type == protocol.EventPhase {
			if ev.Event.Status.Operational.LogLevel != "debug" {
				t.Fatalf("update event %s", ev.Raw)
			}
			break
		}
	}
	if _, err := c.Retry(ctx, client.RetryParams{IfGeneration: 1}); client.ErrorCode(err) != protocol.NoRetryableFrontier {
		t.Fatalf("retry on a fresh run: %v", err)
	}
	if sr, err := c.Stop(ctx, client.StopParams{Mode: "force", IfGeneration: 1}); err != nil || sr.Phase != protocol.PhaseFinished {
		t.Fatalf("stop: %+v %v", sr, err)
	}
	for ev := range sub.Events() {
		if ev.Event.Type == protocol.EventFinished {
			break
		}
	}
	_ = sub.Close()
	rr, err := c.Resubmit(ctx, client.ResubmitParams{IfGeneration: 1, IfRunID: "run-1", ReplacementInput: json.RawMessage(sleepLong)})
	if err != nil || rr.RunID == "run-1" {
		t.Fatalf("resubmit: %+v %v", rr, err)
	}
	if _, err := c.Stop(ctx, client.StopParams{Mode: "force", IfGeneration: 1}); err != nil {
		t.Fatal(err)
	}
	if d, err := c.Delete(ctx, client.DeleteParams{IfGeneration: 1, IfRunID: rr.RunID}); err != nil || !d.Deleted {
		t.Fatalf("delete: %+v %v", d, err)
	}
	if g, err := c.Get(ctx, client.GetParams{}); err != nil || g.Status.Phase != protocol.PhaseEmpty {
		t.Fatalf("get: %+v %v", g, err)
	}
	ls, err := c.Logs(ctx)
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	_ = ls.Close()
	if _, err := c.AgentAttach(ctx, "no-such-execution"); client.ErrorCode(err) != protocol.NotFound {
		t.Fatalf("agent/attach unknown execution: %v", err)
	}

	// A failed step can be retried once it has failed.
	crashGraph, err := os.ReadFile(crash)
	if err != nil {
		t.Fatal(err)
	}
	ar, err = c.Apply(ctx, client.ApplyParams{Graph: crashGraph, Input: json.RawMessage("null"), IfGeneration: &zero})
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.FollowWatch(ctx, client.FollowOptions{Conn: c, RunID: *ar.RunID})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range w.Events() {
		if ev.Event.Type == protocol.EventNodeEnd {
			break
		}
	}
	w.Close()
	if rr, err := c.Retry(ctx, client.RetryParams{IfGeneration: 1}); err != nil || rr.RetryTurnID == "" {
		t.Fatalf("retry after a failure: %+v %v", rr, err)
	}
}

// TestCLIAttachByNodeStreamsLiveOutput: `oecp attach --node` finds the
// execution ref (<runId>/<node>/<k>) from the run's events and streams the
// worker's live output until the execution settles.
func TestCLIAttachByNodeStreamsLiveOutput(t *testing.T) {
	srv := tickerServer(t)

	a := exec.Command(oecpBin, "attach", "--node", "work")
	a.Env = cliEnv(srv)
	aout, _ := a.StdoutPipe()
	var aerr bytes.Buffer
	a.Stderr = &aerr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	asc := bufio.NewScanner(aout)
	if !asc.Scan() || !strings.HasPrefix(asc.Text(), "tick ") {
		t.Fatalf("attach printed %q; stderr %s", asc.Text(), aerr.String())
	}
	expect(t, oecp(t, srv, "stop", "--force"), 0, nil, nil)
	for asc.Scan() {
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("attach: %v; stderr %s", err, aerr.String())
	}
	if !strings.Contains(aerr.String(), "attached to execution run-1/work/1") || !strings.Contains(aerr.String(), "[settled]") {
		t.Fatalf("attach stderr %s", aerr.String())
	}
}

// tickerServer serves a cluster whose test.ticker@1 worker writes "tick N"
// lines until stopped, and applies testdata/ticker.json; it returns once
// the run's step "work" has started.
func tickerServer(t *testing.T) *testServer {
	t.Helper()
	srv := startServer(t, "--workers", tickerWorkers)
	expect(t, oecp(t, srv, "apply", "-f", ticker, "--input", "null"), 0, nil, nil)
	w := startCLI(t, srv, "watch")
	w.waitStdout("work started")
	w.interrupt()
	return srv
}

// cliProc is a CLI command running in the background.
type cliProc struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdout, stderr *bufio.Scanner
	seen           []string
}

// startCLI starts the CLI against srv with its output on pipes.
func startCLI(t *testing.T, srv *testServer, args ...string) *cliProc {
	t.Helper()
	cmd := exec.Command(oecpBin, args...)
	cmd.Env = cliEnv(srv)
	out, err1 := cmd.StdoutPipe()
	errp, err2 := cmd.StderrPipe()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &cliProc{t: t, cmd: cmd, stdout: bufio.NewScanner(out), stderr: bufio.NewScanner(errp)}
}

func (p *cliProc) waitStdout(want string) { p.t.Helper(); p.waitLine(p.stdout, want) }
func (p *cliProc) waitStderr(want string) { p.t.Helper(); p.waitLine(p.stderr, want) }

// waitLine reads sc until a line contains want.
func (p *cliProc) waitLine(sc *bufio.Scanner, want string) {
	p.t.Helper()
	for sc.Scan() {
		p.seen = append(p.seen, sc.Text())
		if strings.Contains(sc.Text(), want) {
			return
		}
	}
	p.t.Fatalf("%v: output ended without %q: %q", p.cmd.Args[1:], want, p.seen)
}

// interrupt sends SIGINT (Ctrl-C) and returns the exit code.
func (p *cliProc) interrupt() int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		p.t.Fatal(err)
	}
	return p.wait()
}

// wait drains the output and returns the exit code.
func (p *cliProc) wait() int {
	p.t.Helper()
	for p.stdout.Scan() {
		p.seen = append(p.seen, p.stdout.Text())
	}
	for p.stderr.Scan() {
		p.seen = append(p.seen, p.stderr.Text())
	}
	err := p.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if err != nil {
		p.t.Fatal(err)
	}
	return 0
}

// TestCLIInterruptExits130: Ctrl-C on watch, logs and attach ends them
// with exit 130.
func TestCLIInterruptExits130(t *testing.T) {
	srv := tickerServer(t)
	for _, c := range []struct {
		args     []string
		ready    string
		onStderr bool
	}{
		{[]string{"watch"}, "work started", false},
		{[]string{"logs"}, "following the cluster's log records", true},
		{[]string{"attach", "--node", "work"}, "tick ", false},
	} {
		p := startCLI(t, srv, c.args...)
		if c.onStderr {
			p.waitStderr(c.ready)
		} else {
			p.waitStdout(c.ready)
		}
		if code := p.interrupt(); code != 130 {
			t.Errorf("%v after Ctrl-C: exit %d, want 130; output %q", c.args, code, p.seen)
		}
	}
}

// TestCLIIfRun: --if-run on every mutating command. resubmit and delete
// send it; apply, update, stop and retry check it with get before the
// request and refuse a mismatch as the server would, sending nothing.
func TestCLIIfRun(t *testing.T) {
	srv := startServer(t)
	expect(t, oecp(t, srv, "apply", "-f", sleepy, "--input", sleepLong), 0, nil, nil)
	conflict := []string{`refused: the current run is "run-1", not the one expected`, "RUN_CONFLICT"}
	for _, args := range [][]string{{"stop", "--force"}, {"retry"}, {"update", "--suspend"}, {"apply", "-f", sleepy}, {"resubmit"}} {
		expect(t, oecp(t, srv, append(args, "--if-run", "run-9")...), 1, nil, conflict)
	}
	if g := getJSON(t, srv); g.Status.Phase != "running" || g.Status.Operational.DispatchState != "active" {
		t.Fatalf("a refused --if-run changed the cluster: %+v", g.Status)
	}
	expect(t, oecp(t, srv, "update", "--suspend", "--if-run", "run-1"), 0, []string{"dispatch suspended"}, nil)
	expect(t, oecp(t, srv, "stop", "--force", "--if-run", "run-1"), 0, []string{"stop (force) accepted for run run-1"}, nil)
	expect(t, oecp(t, srv, "resubmit", "--if-run", "run-1", "--input", `{"ms":1}`), 0, []string{"run run-2 replaces run-1"}, nil)
	expect(t, oecp(t, srv, "stop", "--help"), 0, []string{"--if-run ID", "not atomic"}, nil)
}

// TestCLIIdempotentRetrySameKey: the same command with the same
// --idempotency-key sends the same request, so after a first call that
// succeeded (and changed the run or emptied the cluster) the second
// answers the first call's receipt, deduped, exit 0.
func TestCLIIdempotentRetrySameKey(t *testing.T) {
	srv := startServer(t)
	expect(t, oecp(t, srv, "apply", "-f", sleepy, "--input", sleepLong), 0, nil, nil)
	for range 2 {
		expect(t, oecp(t, srv, "stop", "--force", "--idempotency-key", "stop-1"), 0, []string{"stop (force) accepted for run run-1"}, nil)
	}
	first := oecp(t, srv, "resubmit", "--idempotency-key", "again-1", "--input", `{"ms":1}`)
	expect(t, first, 0, []string{"resubmitted: run run-2 replaces run-1"}, nil)
	expect(t, oecp(t, srv, "watch"), 0, []string{"run run-2 succeeded"}, nil)
	expect(t, oecp(t, srv, "resubmit", "--idempotency-key", "again-1", "--input", `{"ms":1}`), 0, []string{"resubmitted: run run-2 replaces run-1", "replayed"}, nil)
	// A different request under the same key is still refused.
	expect(t, oecp(t, srv, "resubmit", "--idempotency-key", "again-1", "--input", `{"ms":2}`), 1, nil, []string{"IDEMPOTENCY_REUSE"})
	expect(t, oecp(t, srv, "delete", "--idempotency-key", "del-1"), 0, []string{"deleted: the cluster is now empty\n"}, nil)
	expect(t, oecp(t, srv, "delete", "--idempotency-key", "del-1"), 0, []string{"deleted: the cluster is now empty (replayed"}, nil)
}
