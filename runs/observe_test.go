package runs_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
)

func cursors(evs []map[string]any) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e["cursor"].(string)
	}
	return out
}

// TestWatchResumesFromEveryCursor: a finished run's watch resumed after
// any of its cursors delivers exactly the rest, in order, then done.
func TestWatchResumesFromEveryCursor(t *testing.T) {
	r, ctx, sub := finishedWatch(t, "w")
	full, closed := drain(t, sub)
	all := cursors(full)
	// admitted, started a, completed a, started b, completed b, terminal
	if closed != "done" || len(all) != 6 {
		t.Fatalf("full watch: %d events, closed %q", len(all), closed)
	}
	if phase := full[0]["status"].(map[string]any)["phase"]; phase != runs.PhaseAdmitted {
		t.Fatalf("first event phase %v", phase)
	}
	// Every cursor of the run, log records included, is a resume point.
	logSub, err := r.b.Logs(ctx, "w", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := drain(t, logSub)
	points := append(append([]string{"v2:0"}, all...), cursors(logs)...)
	for _, from := range points {
		sub, err := r.b.Watch(ctx, "w", &from)
		if err != nil {
			t.Fatalf("resume after %s: %v", from, err)
		}
		got, closed := drain(t, sub)
		var want []string
		for _, c := range all {
			if seqOf(c) > seqOf(from) {
				want = append(want, c)
			}
		}
		if closed != "done" || !slices.Equal(cursors(got), want) {
			t.Fatalf("after %s: %v (closed %q), want %v", from, cursors(got), closed, want)
		}
	}
	bad := "v2:999999"
	if _, err := r.b.Watch(ctx, "w", &bad); errCode(err) != protocol.InvalidPhase {
		t.Fatalf("unknown cursor: %v", err)
	}
}

func seqOf(c string) int {
	var n int
	fmt.Sscanf(c, "v2:%d", &n)
	return n
}

// TestLogsReplayThenFollow: run/logs replays the durable lines of a
// running execution, follows the ones written later, and closes done
// after the terminal; lines are escaped and filtered by execution.
func TestLogsReplayThenFollow(t *testing.T) {
	r, ctx := startRun(t, "l", "block", "log:2")
	ref := testkit.Recv(t, r.agents.started)
	sub, err := r.b.Logs(ctx, "l", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := sub.Stream.Next(testkit.Bounded(t)) // replayed (or just written) "blocked"
	if err != nil || first.Closed != "" {
		t.Fatalf("first: %+v %v", first, err)
	}
	close(r.agents.release)
	rest, closed := drain(t, sub)
	if closed != "done" || len(rest) != 2 {
		t.Fatalf("followed %d lines, closed %q: %v (first %s)", len(rest), closed, rest, first.Rest)
	}
	rec := rest[0]["record"].(map[string]any)
	if rec["target"] != "agent" || rec["level"] != "info" || rec["message"] != `line 0\nof l/b/1` {
		t.Fatalf("record %v", rec)
	}
	only, err := r.b.Logs(ctx, "l", nil, &ref)
	if err != nil {
		t.Fatal(err)
	}
	lines, _ := drain(t, only)
	if len(lines) != 1 || lines[0]["execution"] != ref {
		t.Fatalf("filtered: %v", lines)
	}
}

// TestAttachLiveThenGone: attach follows an active execution (working,
// output, settled, done); once it has ended attach is GONE; an unknown
// execution is NOT_FOUND.
func TestAttachLiveThenGone(t *testing.T) {
	r, ctx, ref := blockedRun(t, "t")
	sub, err := r.b.Attach(ctx, "t", ref)
	if err != nil {
		t.Fatal(err)
	}
	close(r.agents.release)
	evs, closed := drain(t, sub)
	if closed != "done" || len(evs) < 2 || evs[0]["event"].(map[string]any)["type"] != "working" || evs[len(evs)-1]["event"].(map[string]any)["type"] != "settled" {
		t.Fatalf("attach: %v closed %q", evs, closed)
	}
	waitFinished(t, r.b, ctx, "t")
	if _, err := r.b.Attach(ctx, "t", ref); errCode(err) != protocol.Gone {
		t.Fatalf("ended execution: %v", err)
	}
	if _, err := r.b.Attach(ctx, "t", "t/nope/1"); errCode(err) != protocol.NotFound {
		t.Fatalf("unknown execution: %v", err)
	}
	if _, err := r.b.Attach(ctx, "nope", ref); errCode(err) != protocol.NotFound {
		t.Fatalf("unknown run: %v", err)
	}
}

// TestForceIsIdempotent: force answers stopping with the active execution,
// ends it as refusal and the run as force_stopped; forcing again changes
// nothing.
func TestForceIsIdempotent(t *testing.T) {
	r, ctx, ref := blockedRun(t, "f")
	res, err := r.b.Force(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if got := statusJSON(t, res.Status); got != `{"phase":"stopping","activeExecutions":[{"execution":"`+ref+`","node":"a"}]}` {
		t.Fatalf("force result %s", got)
	}
	final := waitFinished(t, r.b, ctx, "f")
	if got := statusJSON(t, final); got != `{"phase":"finished","terminalResult":{"status":"failed","reason":"force_stopped"}}` {
		t.Fatalf("final %s", got)
	}
	before, _ := r.b.Status(ctx, "f")
	again, err := r.b.Force(ctx, "f")
	if err != nil || again.AtCursor != before.AtCursor || statusJSON(t, again.Status) != statusJSON(t, final) {
		t.Fatalf("second force: %+v %v", again, err)
	}
	if _, err := r.b.Force(ctx, "ghost"); errCode(err) != protocol.NotFound {
		t.Fatalf("unknown run: %v", err)
	}
}

// startRun submits run id: a seq of steps a, b, ... with the given
// instructions.
func startRun(t *testing.T, id string, instrs ...string) (*rig, context.Context) {
	r := newRig(t, nil, 0)
	ctx := as("alice")
	var steps, names []string
	for i, in := range instrs {
		name := string(rune('a' + i))
		steps, names = append(steps, step(name, in)), append(names, name)
	}
	if _, err := r.b.Submit(ctx, id, submission(id, graphOf(steps...), names...)); err != nil {
		t.Fatal(err)
	}
	return r, ctx
}

// finishedWatch runs id, of the steps "log:3" and "echo", to its end and
// returns a watch of it from its start.
func finishedWatch(t *testing.T, id string) (*rig, context.Context, *server.Subscription) {
	t.Helper()
	r, ctx := startRun(t, id, "log:3", "echo")
	waitFinished(t, r.b, ctx, id)
	sub, err := r.b.Watch(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r, ctx, sub
}

// blockedRun starts a one-step run whose agent blocks until released and
// returns once it has started, with its execution ref.
func blockedRun(t *testing.T, id string) (*rig, context.Context, string) {
	r, ctx := startRun(t, id, "block")
	return r, ctx, testkit.Recv(t, r.agents.started)
}

// sharedMemory is the memory store presented as one that other replicas
// write too.
type sharedMemory struct{ store.Store }

func (sharedMemory) SharedByReplicas() bool { return true }

// watchOnAnotherReplica starts run "x", one step that blocks, on a
// replica of store writer (a) and, once its step started, returns a watch
// of it served by a replica of store reader (b) that runs nothing.
func watchOnAnotherReplica(t *testing.T, writer, reader store.Store) (a *rig, b *runs.Backend, sub *server.Subscription) {
	t.Helper()
	a = newRig(t, writer, 0)
	b = runs.New(runs.Config{Store: reader, Agents: newFakeAgents(), Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(b.Close)
	ctx := as("alice")
	if _, err := a.b.Submit(ctx, "x", oneStep("x", "block")); err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, a.agents.started)
	sub, err := b.Watch(ctx, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	return a, b, sub
}

// TestWatchOnAnotherReplicaFollows: a watch served by a replica that does
// not run the run (a second backend on the same shared store, with no
// supervisor) follows its records to the terminal one, woken by the store
// rather than by its own writes.
func TestWatchOnAnotherReplicaFollows(t *testing.T) {
	st := sharedMemory{store.NewMemory()}
	a, _, sub := watchOnAnotherReplica(t, st, st)
	for i := 0; i < 2; i++ { // run started, node started: all there is while it blocks
		if n, err := sub.Stream.Next(testkit.Bounded(t)); err != nil || n.Closed != "" {
			t.Fatalf("replayed record %d: %+v %v", i, n, err)
		}
	}
	close(a.agents.release)
	rest, closed := drain(t, sub)
	if closed != "done" || len(rest) == 0 {
		t.Fatalf("followed %d records, closed %q", len(rest), closed)
	}
}

// TestWatchHandsOverWhatIsReadyAsOneBatch: a finished run's watch hands
// over every event of the page it read and the done after the terminal in
// one batch, so the connection writes them together; a live run's watch
// hands over what is ready and waits for nothing more.
func TestWatchHandsOverWhatIsReadyAsOneBatch(t *testing.T) {
	r, ctx, sub := finishedWatch(t, "b")
	bs, ok := sub.Stream.(server.BatchStream)
	if !ok {
		t.Fatal("a run's watch is not a BatchStream")
	}
	batch, err := bs.NextBatch(ctx, nil, 256)
	if err != nil {
		t.Fatal(err)
	}
	// admitted, started a, completed a, started b, completed b, terminal, done
	if len(batch) != 7 || batch[6].Closed != "done" {
		t.Fatalf("one batch of %d: %+v", len(batch), batch)
	}
	for i, n := range batch[:6] {
		if n.Closed != "" || n.Cursor == "" {
			t.Fatalf("notification %d: %+v", i, n)
		}
	}
	small, err := r.b.Watch(ctx, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	part, err := small.Stream.(server.BatchStream).NextBatch(ctx, nil, 4)
	if err != nil || len(part) != 4 || part[3].Cursor != batch[3].Cursor {
		t.Fatalf("a batch of at most 4: %+v, %v", part, err)
	}
	rest, err := small.Stream.(server.BatchStream).NextBatch(ctx, nil, 256)
	if err != nil || len(rest) != 3 || rest[0].Cursor != batch[4].Cursor || rest[2].Closed != "done" {
		t.Fatalf("the rest: %+v, %v", rest, err)
	}

	// A live run: what is ready comes at once, and the batch does not
	// wait for the step that is still running.
	live, ctx := startRun(t, "l", "block")
	testkit.Recv(t, live.agents.started)
	sub, err = live.b.Watch(ctx, "l", nil)
	if err != nil {
		t.Fatal(err)
	}
	ready, err := sub.Stream.(server.BatchStream).NextBatch(ctx, nil, 256)
	if err != nil || len(ready) == 0 || ready[len(ready)-1].Closed != "" {
		t.Fatalf("live: %+v, %v", ready, err)
	}
	close(live.agents.release)
	more, closed := drain(t, sub)
	if closed != "done" || len(ready)+len(more) != 4 { // admitted, started, completed, terminal
		t.Fatalf("live: %d then %d events, closed %q", len(ready), len(more), closed)
	}
}
