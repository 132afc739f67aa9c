package faults

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
)

// killPidFiles kills, when the test ends, the processes whose pids the
// worker wrote, should a failure have left them running.
func killPidFiles(t *testing.T, files ...string) {
	t.Cleanup(func() {
		for _, f := range files {
			b, err := os.ReadFile(f)
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// TestSIGKILLKillsTheOrphanBeforeItsRetry: a server killed with SIGKILL
// leaves its worker's process group running (the leader and a background
// child). The restarted server kills that group before it records the
// crash and starts attempt 2, which finds both processes gone: the step
// never runs twice at once.
func TestSIGKILLKillsTheOrphanBeforeItsRetry(t *testing.T) {
	dir := t.TempDir()
	leader, child := filepath.Join(dir, "leader.pid"), filepath.Join(dir, "child.pid")
	killPidFiles(t, leader, child)
	// Attempt 1 records its pids and waits on a background child; attempt
	// 2 answers whether either still runs (a zombie has ended).
	script := fmt.Sprintf(`read in
if [ -e %[1]q ]; then
  for f in %[1]q %[2]q; do
    if [ -r /proc/$(cat "$f")/stat ]; then
      set -- $(cat /proc/$(cat "$f")/stat)
      if [ "$3" != Z ]; then echo '{"text":"still running"}'; exit 0; fi
    fi
  done
  echo '{"text":"gone"}'
else
  echo $$ > %[1]q; sleep 3600 & echo $! > %[2]q; echo started >&2; wait
fi`, leader, child)
	args := []string{"--data", filepath.Join(dir, "data"), "--workers", stepWorker(t, dir, script)}

	srv := serve(t, args...)
	run := startRun(t, dial(t, srv), 2)
	_ = srv.stop(t, syscall.SIGKILL)

	c := dial(t, serve(t, args...))
	es := history(t, c, run, finished)
	if got := terminal(t, c); got != `succeeded {"text":"gone"}` {
		t.Fatalf("terminal result %s; events:%s", got, describe(es))
	}
}

// TestSIGTERMInterruptsWithoutCostingAnAttempt: SIGTERM during a step of
// one attempt records no node_end but a fault naming the execution (code
// unavailable, no observable effect), and after the restart the same
// attempt runs again and the run finishes: no attempt is spent and the run
// is not held.
func TestSIGTERMInterruptsWithoutCostingAnAttempt(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	script := fmt.Sprintf(`read in
if [ -e %[1]q ]; then echo '{"text":"resumed"}'; else touch %[1]q; echo started >&2; exec sleep 3600; fi`, marker)
	args := []string{"--data", filepath.Join(dir, "data"), "--workers", stepWorker(t, dir, script)}

	srv := serve(t, args...)
	run := startRun(t, dial(t, srv), 1)
	if err := srv.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("oecp serve exited with %v after SIGTERM, want 0", err)
	}

	c := dial(t, serve(t, args...))
	// Stop at the run's end, or at the first sign that the interruption
	// cost the attempt (a node_end or a hold's bookmark).
	es := history(t, c, run, func(ev client.WatchEvent) bool {
		return finished(ev) || ev.Event.Type == protocol.EventBookmark ||
			(ev.Event.Type == protocol.EventNodeEnd && ev.Event.Node.Attempt == 1 && strings.Contains(string(ev.Event.Outcome), "crash"))
	})
	var types []string
	for _, ev := range es[1:] {
		types = append(types, ev.Event.Type)
	}
	if strings.Join(types, " ") != "node_begin fault node_begin node_end finished" {
		t.Fatalf("events after admission:%s", describe(es))
	}
	var f struct{ ExecutionRef, Code, Consequence, Retry string }
	if err := json.Unmarshal(es[2].Event.Fault, &f); err != nil {
		t.Fatal(err)
	}
	if f.ExecutionRef != run+"/w/1" || f.Code != "unavailable" || f.Consequence != "no_observable_effect" || f.Retry != "retryable" {
		t.Fatalf("interrupt fault %s", es[2].Event.Fault)
	}
	if es[3].Event.Node.Attempt != 1 || es[4].Event.Node.Attempt != 1 {
		t.Fatalf("the same attempt must run again:%s", describe(es))
	}
	if got := terminal(t, c); got != `succeeded {"text":"resumed"}` {
		t.Fatalf("terminal result %s", got)
	}
}

// serveOnTmpfs launches `oecp serve --data data` in a mount namespace of
// its own, where data is a small tmpfs, and returns the path through which
// the test sees that tmpfs. The test is skipped where the namespace or
// the mount cannot be made.
func serveOnTmpfs(t *testing.T, data string, args ...string) (*server, string) {
	t.Helper()
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
		`mount -t tmpfs -o size=8m,mode=0700 oecp-faults "$0" && exec "$@"`, data,
		bin, "serve", "--listen", "127.0.0.1:0", "--data", data}, args...)
	s, err := launch(t, argv...)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || strings.Contains(err.Error(), "unshare:") || strings.Contains(err.Error(), "mount:") {
			t.Skipf("no private tmpfs here: %v", err)
		}
		t.Fatal(err)
	}
	return s, filepath.Join("/proc", strconv.Itoa(s.cmd.Process.Pid), "root", data)
}

// TestDiskFullKeepsTheOutcome: the disk fills up while a step runs.
// Writes answer STORE_UNAVAILABLE (not INTERNAL_ERROR) meanwhile; the
// step's settlement fails but is kept, and once space is freed the
// worker's real outcome is recorded (an unrelated commit does not turn it
// into a crash) and the run succeeds. The request refused while the disk
// was full succeeds when sent again.
func TestDiskFullKeepsTheOutcome(t *testing.T) {
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	script := fmt.Sprintf(`read in; echo started >&2; while [ ! -e %[1]q ]; do sleep 0.01; done; echo '{"text":"done"}'`, release)
	srv, fs := serveOnTmpfs(t, filepath.Join(dir, "data"), "--workers", stepWorker(t, dir, script))
	c := dial(t, srv)
	run := startRun(t, c, 1)
	filler := filepath.Join(fs, "filler")
	testkit.FillDisk(t, filler)

	ctx := guarded(t)
	g, err := c.Get(ctx, client.GetParams{})
	if err != nil {
		t.Fatal(err)
	}
	label := client.UpdateParams{Labels: map[string]string{"disk": "freed"}, IfGeneration: *g.Status.ObservedGeneration, IdempotencyKey: "label-after-full"}
	if _, err := c.Update(ctx, label); errCode(err) != fmt.Sprintf("%d %s", protocol.CodeInternalError, cluster.StoreUnavailable) {
		t.Fatalf("update on a full disk: %v, want -32603 %s", err, cluster.StoreUnavailable)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.await(`engine: settle.*database or disk is full`); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Update(ctx, label); err != nil {
		t.Fatalf("update once space is freed: %v", err)
	}
	es := history(t, c, run, func(ev client.WatchEvent) bool { return ev.Event.Type == protocol.EventNodeEnd })
	if end := es[len(es)-1]; !strings.Contains(string(end.Event.Outcome), `"verified"`) {
		t.Fatalf("the worker's outcome was lost:%s", describe(es))
	}
	history(t, c, run, finished)
	if got := terminal(t, c); got != `succeeded {"text":"done"}` {
		t.Fatalf("terminal result %s", got)
	}
}

// TestUnusableStoreRefusesToStart: `oecp serve` on a database it cannot
// write, or whose pages are damaged, exits with the cause instead of
// serving reads and failing every write.
func TestUnusableStoreRefusesToStart(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(t *testing.T, db string)
		want   string
	}{
		{"read-only", func(t *testing.T, db string) {
			if out, err := exec.Command("chattr", "+i", db).CombinedOutput(); err != nil {
				t.Skipf("cannot make the database immutable: %v %s", err, out)
			}
			t.Cleanup(func() { _ = exec.Command("chattr", "-i", db).Run() })
		}, "cannot be written"},
		{"damaged", func(t *testing.T, db string) {
			f, err := os.OpenFile(db, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// Page 2 on (past the header and the schema) is overwritten.
			if _, err := f.WriteAt([]byte(strings.Repeat("\xa5", 4096)), 4096); err != nil {
				t.Fatal(err)
			}
		}, "damaged"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			srv := serve(t, "--data", data)
			if _, err := dial(t, srv).Apply(guarded(t), client.ApplyParams{Graph: napGraph("nap"), Input: []byte(`{"text":"x","ms":0}`)}); err != nil {
				t.Fatal(err)
			}
			if err := srv.stop(t, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			tc.break_(t, filepath.Join(data, "oecp.db"))
			_, err := launch(t, bin, "serve", "--listen", "127.0.0.1:0", "--data", data)
			if err == nil {
				t.Fatalf("oecp serve started on a %s database", tc.name)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("oecp serve on a %s database: %v", tc.name, err)
			}
		})
	}
}

// stepWorker writes a workers file declaring test.step@1, a command step
// running sh -c script with the node's null input on stdin and answering
// {"text": string}.
func stepWorker(t *testing.T, dir, script string) string {
	t.Helper()
	text := `{"kind":"record","fields":{"text":{"required":true,"type":{"kind":"string"}}}}`
	spec := fmt.Sprintf(`[{"worker":"test.step@1","kind":"step","input":{"kind":"null"},"output":%s,"argv":["/bin/sh","-c",%q],"env":["PATH"]}]`, text, script)
	path := filepath.Join(dir, "workers.json")
	if err := os.WriteFile(path, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// stepGraph is a run of one test.step@1 step named w, whose output ends
// the run, with the given attempts.
func stepGraph(attempts int) json.RawMessage {
	text := `{"kind":"record","fields":{"text":{"required":true,"type":{"kind":"string"}}}}`
	return json.RawMessage(fmt.Sprintf(`{"profile":"openengine.graph.full/v1","initialInput":%[1]s,
		"policy":{"policy":"policy.default@1","default":"deny"},
		"root":{"kind":"seq","name":"main","state":%[1]s,"promotedStatePaths":[],"children":[
		{"kind":"step","name":"w","worker":"test.step@1","input":{"kind":"null"},"output":%[1]s,"inputBindings":[],
		 "writeBindings":[{"value":{"node":"w","channel":"out","path":["text"]},"target":["text"]}],"timeoutMs":3600000,"attempts":%[2]d},
		{"kind":"succeed","name":"done","output":%[1]s,"bindings":[{"target":["text"],"value":{"source":"state","path":["text"]}}]}]}}`, text, attempts))
}

// startRun applies stepGraph and waits until the worker logs "started".
func startRun(t *testing.T, c *client.Conn, attempts int) string {
	t.Helper()
	ctx := guarded(t)
	logs, err := c.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	r, err := c.Apply(ctx, client.ApplyParams{Graph: stepGraph(attempts), Input: json.RawMessage(`{"text":"in"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range logs.Events() {
		if ev.Record.Message == "started" {
			return *r.RunID
		}
	}
	t.Fatalf("logs ended before the worker started: %v", logs.Err())
	return ""
}

// errCode is the JSON-RPC code and data code of a server error.
func errCode(err error) string {
	var e *client.Error
	if !errors.As(err, &e) {
		return fmt.Sprint(err)
	}
	return fmt.Sprintf("%d %s", e.Code, e.DataCode)
}

// nativeArgs are `oecp serve` args whose codex harness is a command
// harness running script (with the turn request on its stdin); the
// server's run directories go under dir. The agents run unconfined: they
// talk to the test through files in dir, which the agent sandbox hides
// (cmd/oecp tests the sandbox).
func nativeArgs(t *testing.T, dir, script string) []string {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{"codex": map[string]any{"driver": "command", "argv": []string{"/bin/sh", "-c", "PATH=/usr/bin:/bin\n" + script}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "harness.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", dir) // the server's run directories
	return []string{"--data", filepath.Join(dir, "data"), "--harness", path, "--agent-unconfined"}
}

// startNative submits native run id, one agent step w, and waits until
// the harness logs "started".
func startNative(t *testing.T, c *client.Conn, id string) {
	t.Helper()
	ctx := guarded(t)
	graph := `{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":{"policy":"policy.default@1","default":"deny"},` +
		`"root":{"kind":"seq","name":"main","state":{"kind":"null"},"promotedStatePaths":[],"children":[` +
		`{"kind":"step","name":"w","worker":"agent.w@1","instructions":"Work.","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":3600000,"attempts":1},` +
		`{"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}]}}`
	sub, err := json.Marshal(client.RunSubmission{Title: "faults " + id, Graph: json.RawMessage(graph), InitialInput: json.RawMessage("null"),
		Runtime:       json.RawMessage(`{"harness":"codex","provider":"openai","size":"small","nodes":{"w":{"kind":"agent","model":"gpt-5.6"}}}`),
		Source:        client.RunSource{Repository: "acme/app", Branch: "main", Revision: strings.Repeat("ab", 20)},
		SubmissionKey: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunSubmit(ctx, client.RunSubmitParams{RunID: id, Submission: sub}); err != nil {
		t.Fatal(err)
	}
	for ev := range runLogs(t, c, id).Events() {
		if strings.Contains(ev.Record.Message, "started") {
			return
		}
	}
	t.Fatal("logs ended before the harness started")
}

func runLogs(t *testing.T, c *client.Conn, id string) *client.Subscription[client.RunLogEvent] {
	t.Helper()
	logs, _, err := c.RunLogs(guarded(t), client.RunLogsParams{RunID: id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logs.Close() })
	return logs
}

// nativeEnd follows run id to its end and returns its terminal result
// and its warn log lines ("execution: message").
func nativeEnd(t *testing.T, c *client.Conn, id string) (string, []string) {
	t.Helper()
	w, _, err := c.RunWatch(guarded(t), client.RunWatchParams{RunID: id})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for range w.Events() {
	}
	st, err := c.RunStatus(guarded(t), id)
	if err != nil || st.Status.TerminalResult == nil {
		t.Fatalf("status %+v %v", st, err)
	}
	tr, _ := json.Marshal(st.Status.TerminalResult)
	var warns []string
	for ev := range runLogs(t, c, id).Events() {
		if ev.Record.Level == "warn" {
			warns = append(warns, ev.Execution+": "+ev.Record.Message)
		}
	}
	return string(tr), warns
}

// alive reports whether the pid written in file runs (a zombie has ended).
func alive(t *testing.T, file string) bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	return !strings.HasPrefix(s[strings.LastIndexByte(s, ')')+1:], " Z")
}

// TestNativeSIGKILLKillsTheOrphan: a server killed with SIGKILL during a
// native run's unconfined harness turn takes the CLI process along (its
// parent-death signal) but may leave a background child of it in the
// turn's process group. The restarted server kills that group before it
// records the orphan interrupted (its server failed, not the execution)
// and runs the same node again, whose answer finishes the run.
func TestNativeSIGKILLKillsTheOrphan(t *testing.T) {
	dir := t.TempDir()
	leader, child := filepath.Join(dir, "leader.pid"), filepath.Join(dir, "child.pid")
	killPidFiles(t, leader, child)
	args := nativeArgs(t, dir, fmt.Sprintf(`read -r req
if [ -e %[1]q ]; then echo '{"session":"s","text":"null"}'; exit 0; fi
echo $$ > %[1]q; sleep 3600 & echo $! > %[2]q; echo started >&2; wait`, leader, child))

	srv := serve(t, args...)
	startNative(t, dial(t, srv), "k")
	_ = srv.stop(t, syscall.SIGKILL)
	if !alive(t, child) {
		t.Fatal("the turn's background child must survive the server's SIGKILL")
	}

	c := dial(t, serve(t, args...))
	tr, warns := nativeEnd(t, c, "k")
	if alive(t, leader) || alive(t, child) {
		t.Fatal("the orphaned turn's process group still runs after the restart settled it")
	}
	if tr != `{"status":"succeeded"}` {
		t.Fatalf("terminal %s; warns %q", tr, warns)
	}
	if len(warns) != 1 || !strings.HasPrefix(warns[0], "k/w/1: this execution was running on a server that was lost") {
		t.Fatalf("warn logs %q", warns)
	}
}

// TestNativeSIGTERMInterrupts: SIGTERM during a native run's harness turn
// records the execution interrupted (a warn log line naming it, no
// completion), and the restarted server runs the same node again, whose
// answer finishes the run.
func TestNativeSIGTERMInterrupts(t *testing.T) {
	dir := t.TempDir()
	marker, again := filepath.Join(dir, "started"), filepath.Join(dir, "again")
	args := nativeArgs(t, dir, fmt.Sprintf(`read -r req
if [ -e %[1]q ]; then touch %[2]q; echo '{"session":"s","text":"null"}'; else touch %[1]q; echo started >&2; exec sleep 3600; fi`, marker, again))

	srv := serve(t, args...)
	startNative(t, dial(t, srv), "g")
	if err := srv.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("oecp serve exited with %v after SIGTERM, want 0", err)
	}

	c := dial(t, serve(t, args...))
	tr, warns := nativeEnd(t, c, "g")
	if tr != `{"status":"succeeded"}` {
		t.Fatalf("terminal %s; warns %q", tr, warns)
	}
	if _, err := os.Stat(again); err != nil {
		t.Fatalf("the node did not run again: %v", err)
	}
	if len(warns) != 1 || !strings.HasPrefix(warns[0], "g/w/1: this execution was interrupted") {
		t.Fatalf("warn logs %q", warns)
	}
}
