package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs"
)

// agentScript is the codex harness of runServer: an agent whose prompt
// holds BLOCK writes "tick N" lines until it is stopped; any other answers
// null after one log line.
const agentScript = `read -r turn || true
case "$turn" in
*BLOCK*) i=0; while :; do i=$((i+1)); echo "tick $i" >&2; /bin/sleep 0.1; done ;;
*) echo "answering" >&2; echo '{"session":"s","text":"null"}' ;;
esac
`

// runServer serves the real backend (a capsule) with agentScript as its
// codex harness over one binding, and dials it.
func runServer(t *testing.T, bd binding) *client.Conn {
	t.Helper()
	dial, _ := runBackend(t, bd)
	return mustDial(t, dial)
}

// runBackend serves the real backend (see runServer) and returns the
// binding's dialer and connection dropper.
func runBackend(t *testing.T, bd binding) (client.Dialer, func()) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(script, []byte(agentScript), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := harness.Parse("harness.json", fmt.Appendf(nil, `{"codex":{"driver":"command","argv":["/bin/sh",%q]}}`, script))
	if err != nil {
		t.Fatal(err)
	}
	c, err := capsule.New(capsule.Options{Harness: cfg, RunDir: filepath.Join(dir, "runs"), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(func() { _ = c.Close() })
	return bd.start(t, c.Backend())
}

// oneStepRun is a submission of one agent step with instructions instr.
func oneStepRun(key, instr string) json.RawMessage {
	g := `{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":{"policy":"policy.default@1","default":"deny"},` +
		`"root":{"kind":"seq","name":"main","state":{"kind":"null"},"promotedStatePaths":[],"children":[` +
		`{"kind":"step","name":"work","worker":"agent.work@1","instructions":"` + instr + `","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":600000,"attempts":1},` +
		`{"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}]}}`
	sub, _ := json.Marshal(client.RunSubmission{
		Title: "run " + key, Graph: json.RawMessage(g), InitialInput: json.RawMessage("null"),
		Runtime:       json.RawMessage(`{"harness":"codex","provider":"openai","size":"tiny","nodes":{"work":{"kind":"agent","model":"gpt-5.6"}}}`),
		Source:        client.RunSource{Repository: "acme/widgets", Branch: "main", Revision: "0123456789abcdef0123456789abcdef01234567"},
		SubmissionKey: key,
	})
	return sub
}

// drainRun reads a run/* subscription to its end and checks that the
// server closed it done.
func drainRun[E any](t *testing.T, sub *client.Subscription[E]) []E {
	t.Helper()
	var out []E
	for ev, ok := testkit.RecvOK(t, sub.Events()); ok; ev, ok = testkit.RecvOK(t, sub.Events()) {
		out = append(out, ev)
	}
	var ce *client.ClosedError
	if err := sub.Err(); !errors.As(err, &ce) || ce.Reason != "done" {
		t.Fatalf("subscription ended with %v, want closed done", err)
	}
	return out
}

// TestRunMethodsFinishedRun: a run submitted through the typed methods
// runs to its end on the real backend; watch, logs, status and list show
// it, and the same submission again answers the same run.
func TestRunMethodsFinishedRun(t *testing.T) {
	forEachBinding(t, func(t *testing.T, bd binding) {
		c := runServer(t, bd)
		ctx := context.Background()
		res, err := c.RunSubmit(ctx, client.RunSubmitParams{RunID: "r1", Submission: oneStepRun("k1", "answer")})
		if err != nil || res.RunID != "r1" {
			t.Fatalf("submit = %+v, %v", res, err)
		}
		sub, at, err := c.RunWatch(ctx, client.RunWatchParams{RunID: "r1"})
		if err != nil || at.RunID != "r1" || at.AtCursor != "v2:0" || at.SubscriptionID != sub.ID {
			t.Fatalf("watch = %+v, %v", at, err)
		}
		evs := drainRun(t, sub)
		last := evs[len(evs)-1]
		if evs[0].Status.Phase != "admitted" || evs[0].Title != "run k1" || last.Status.Phase != "finished" ||
			last.Status.TerminalResult == nil || last.Status.TerminalResult.Status != "succeeded" || !json.Valid(last.Raw) {
			t.Fatalf("watch events %+v … %+v", evs[0], last)
		}
		st, err := c.RunStatus(ctx, "r1")
		if err != nil || st.AtCursor != last.Cursor || st.Source.Repository != "acme/widgets" || st.Size != "tiny" || st.Status.Phase != "finished" {
			t.Fatalf("status = %+v, %v", st, err)
		}
		list, err := c.RunList(ctx)
		if err != nil || len(list.Runs) != 1 || list.Runs[0].RunID != "r1" {
			t.Fatalf("list = %+v, %v", list, err)
		}
		logs, _, err := c.RunLogs(ctx, client.RunLogsParams{RunID: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		lines := drainRun(t, logs)
		if len(lines) == 0 || lines[0].Record.Message != "answering" || lines[0].Execution != "r1/work/1" {
			t.Fatalf("logs %+v", lines)
		}
		// Resuming after the last watch cursor replays nothing.
		sub, _, err = c.RunWatch(ctx, client.RunWatchParams{RunID: "r1", FromCursor: last.Cursor})
		if err != nil {
			t.Fatal(err)
		}
		if evs := drainRun(t, sub); len(evs) != 0 {
			t.Fatalf("watch after the last cursor replayed %+v", evs)
		}
		again, err := c.RunSubmit(ctx, client.RunSubmitParams{RunID: client.NewRunID(), Submission: oneStepRun("k1", "answer")})
		if err != nil || again.RunID != "r1" {
			t.Fatalf("submit again = %+v, %v", again, err)
		}
		if _, err := c.RunStatus(ctx, "nope"); client.ErrorCode(err) != protocol.NotFound {
			t.Fatalf("status of an unknown run: %v", err)
		}
		if _, err := c.RunSubmit(ctx, client.RunSubmitParams{RunID: "r2", Submission: oneStepRun("k2", "")}); client.ErrorCode(err) != protocol.SchemaViolation {
			t.Fatalf("submit with empty instructions: %v", err)
		}
	})
}

// TestRunMethodsForceAndAttach: attach streams a running agent's output,
// force stops the run, and the attach ends settled.
func TestRunMethodsForceAndAttach(t *testing.T) {
	forEachBinding(t, func(t *testing.T, bd binding) {
		c := runServer(t, bd)
		ctx := context.Background()
		if _, err := c.RunSubmit(ctx, client.RunSubmitParams{RunID: "b1", Submission: oneStepRun("b1", "BLOCK")}); err != nil {
			t.Fatal(err)
		}
		watch, _, err := c.RunWatch(ctx, client.RunWatchParams{RunID: "b1"})
		if err != nil {
			t.Fatal(err)
		}
		var exec string
		for ev, ok := testkit.RecvOK(t, watch.Events()); ok; ev, ok = testkit.RecvOK(t, watch.Events()) {
			if len(ev.Status.ActiveExecutions) > 0 {
				exec = ev.Status.ActiveExecutions[0].Execution
				break
			}
		}
		// Until its first log line the worker may not have started: the
		// server answers GONE to an attach before that.
		logs, _, err := c.RunLogs(ctx, client.RunLogsParams{RunID: "b1", Execution: exec})
		if err != nil {
			t.Fatal(err)
		}
		testkit.Recv(t, logs.Events())
		_ = logs.Close()
		att, res, err := c.RunAttach(ctx, "b1", exec)
		if err != nil || res.Execution != exec || res.RunID != "b1" {
			t.Fatalf("attach = %+v, %v", res, err)
		}
		for ev, ok := testkit.RecvOK(t, att.Events()); ok; ev, ok = testkit.RecvOK(t, att.Events()) {
			if ev.Event.Type == "output" && strings.HasPrefix(*ev.Event.Text, "tick ") {
				break
			}
		}
		st, err := c.RunForce(ctx, "b1")
		if err != nil || st.Status.Phase != "stopping" || len(st.Status.ActiveExecutions) != 1 {
			t.Fatalf("force = %+v, %v", st, err)
		}
		settled := false
		for ev, ok := testkit.RecvOK(t, att.Events()); ok; ev, ok = testkit.RecvOK(t, att.Events()) {
			settled = settled || ev.Event.Type == "settled"
		}
		if !settled {
			t.Fatalf("attach ended without settled: %v", att.Err())
		}
		var last client.RunWatchEvent
		for ev, ok := testkit.RecvOK(t, watch.Events()); ok; ev, ok = testkit.RecvOK(t, watch.Events()) {
			last = ev
		}
		if tr := last.Status.TerminalResult; tr == nil || tr.Status != "failed" || tr.Reason != "force_stopped" {
			t.Fatalf("the forced run ended %+v", last.Status)
		}
		logs, _, err = c.RunLogs(ctx, client.RunLogsParams{RunID: "b1", Execution: exec})
		if err != nil {
			t.Fatal(err)
		}
		if lines := drainRun(t, logs); len(lines) == 0 || lines[0].Record.Message != "tick 1" {
			t.Fatalf("logs of %s: %+v", exec, lines)
		}
		if _, _, err := c.RunAttach(ctx, "b1", exec); client.ErrorCode(err) != protocol.Gone {
			t.Fatalf("attach to the ended execution: %v", err)
		}
	})
}

// TestNewRunID: generated run ids are valid run ids that carry the time
// they were made.
func TestNewRunID(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	id := client.NewRunID()
	after := time.Now()
	if err := runs.ValidRunID(id); err != nil {
		t.Fatalf("NewRunID() = %q: %v", id, err)
	}
	at, ok := client.RunIDTime(id)
	if !ok || at.Before(before) || at.After(after) {
		t.Fatalf("RunIDTime(%q) = %v, %v; want between %v and %v", id, at, ok, before, after)
	}
	if id == client.NewRunID() {
		t.Fatal("two ids are equal")
	}
	if _, ok := client.RunIDTime("tick-1"); ok {
		t.Fatal("RunIDTime read a time from tick-1")
	}
}

// TestFollowRunResumesAfterDrop: a followed run/logs and run/watch go on
// after every connection is dropped, on a new one, each event once and in
// order, until the server ends them after the run's terminal record.
func TestFollowRunResumesAfterDrop(t *testing.T) {
	forEachBinding(t, func(t *testing.T, bd binding) {
		dial, drop := runBackend(t, bd)
		c := mustDial(t, dial)
		ctx := context.Background()
		if _, err := c.RunSubmit(ctx, client.RunSubmitParams{RunID: "f1", Submission: oneStepRun("f1", "BLOCK")}); err != nil {
			t.Fatal(err)
		}
		var resumed atomic.Int32
		o := client.FollowOptions{RunID: "f1", Conn: c, Dial: dial, Backoff: noBackoff,
			OnReconnect: func(error, string) { resumed.Add(1) }}
		logs, err := client.FollowRunLogs(ctx, o, "")
		if err != nil {
			t.Fatal(err)
		}
		defer logs.Close()
		watch, err := client.FollowRunWatch(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		defer watch.Close()
		testkit.Recv(t, watch.Events())
		want := 1
		for ev, ok := testkit.RecvOK(t, logs.Events()); ok; ev, ok = testkit.RecvOK(t, logs.Events()) {
			if ev.Record.Message != fmt.Sprintf("tick %d", want) {
				t.Fatalf("log record %q, want tick %d", ev.Record.Message, want)
			}
			if want++; want == 3 {
				drop()
			}
			if want == 6 {
				break
			}
		}
		if resumed.Load() == 0 {
			t.Fatal("the follower did not resume")
		}
		c2 := mustDial(t, dial)
		if _, err := c2.RunForce(ctx, "f1"); err != nil {
			t.Fatal(err)
		}
		cursors := map[string]bool{}
		var last client.RunWatchEvent
		for ev, ok := testkit.RecvOK(t, watch.Events()); ok; ev, ok = testkit.RecvOK(t, watch.Events()) {
			if cursors[ev.Cursor] {
				t.Fatalf("watch delivered %s twice", ev.Cursor)
			}
			cursors[ev.Cursor], last = true, ev
		}
		if err := watch.Err(); err != nil || last.Status.Phase != "finished" {
			t.Fatalf("watch ended %v after %+v", err, last.Status)
		}
		for _, ok := testkit.RecvOK(t, logs.Events()); ok; _, ok = testkit.RecvOK(t, logs.Events()) {
		}
		if err := logs.Err(); err != nil {
			t.Fatalf("logs ended %v", err)
		}
	})
}
