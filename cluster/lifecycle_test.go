package cluster_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

func running(t *testing.T) *cluster.Backend {
	t.Helper()
	b := cluster.NewFixture(cluster.Isolated)
	if _, err := b.Apply(bg, applyP(goldenGraph, "create", ptr(int64(0)))); err != nil {
		t.Fatal(err)
	}
	return b
}

func watchAll(t *testing.T, b *cluster.Backend, run string) *server.Subscription {
	t.Helper()
	s, err := b.Watch(bg, protocol.WatchParams{RunID: &run})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stream.Close)
	return s
}

func eventTypes(ns []server.Notification) string {
	var out []string
	for _, n := range ns {
		s := string(n.Rest)
		i := strings.Index(s, `"type":"`)
		s = s[i+8:]
		out = append(out, s[:strings.IndexByte(s, '"')])
	}
	return strings.Join(out, ",")
}

func TestUpdateOnEmptyIsInvalidPhase(t *testing.T) {
	b := cluster.NewFixture(cluster.Isolated)
	_, err := b.Update(bg, protocol.UpdateParams{LogLevel: ptr("debug"), IfGeneration: 0, IdempotencyKey: "u"})
	expectCode(t, err, protocol.InvalidPhase)
	if errDetails(err) != `{"currentPhase":"empty"}` {
		t.Fatal(errDetails(err))
	}
	_, err = b.Update(bg, protocol.UpdateParams{LogLevel: ptr("debug"), IfGeneration: 2, IdempotencyKey: "u"})
	expectCode(t, err, protocol.GenerationConflict)
	if errDetails(err) != `{"currentGeneration":null}` {
		t.Fatal(errDetails(err))
	}
}

func TestUpdateSuspendResumePreservesFrontier(t *testing.T) {
	b := running(t)
	e := drive(t, b, "local")
	e.failAndHold(e.mustDispatch())
	r, err := b.Update(bg, protocol.UpdateParams{HasLabels: true, Labels: map[string]string{"a": "1", "b": "2"}, Suspended: ptr(true), IfGeneration: 1, IdempotencyKey: "s"})
	if err != nil || mustJSON(t, r.Operational) != `{"labels":{"a":"1","b":"2"},"logLevel":"info","dispatchState":"suspended","inFlight":0}` {
		t.Fatalf("%v %s", err, mustJSON(t, r))
	}
	// Suspension gates dispatch and retry.
	if _, err := e.dispatch("worker", protocol.Null); !errors.Is(err, engine.ErrGateClosed) {
		t.Fatalf("dispatch while suspended: %v", err)
	}
	_, err = b.Retry(bg, protocol.RetryParams{IfGeneration: 1, IdempotencyKey: "r0"})
	if errDetails(err) != `{"dispatchState":"suspended"}` || err.(*protocol.Error).Message != protocol.MsgDispatchDenied {
		t.Fatalf("retry suspended: %v %s", err, errDetails(err))
	}
	// Labels replace the whole map.
	r, err = b.Update(bg, protocol.UpdateParams{HasLabels: true, Labels: map[string]string{"c": "3"}, Suspended: ptr(false), IfGeneration: 1, IdempotencyKey: "r"})
	if err != nil || mustJSON(t, r.Operational.Labels) != `{"c":"3"}` || r.Operational.DispatchState != "active" {
		t.Fatalf("%v %s", err, mustJSON(t, r))
	}
	rr, err := b.Retry(bg, protocol.RetryParams{IfGeneration: 1, IdempotencyKey: "r1"})
	if err != nil || rr.RetriedTurnID != "x1" {
		t.Fatalf("frontier lost: %v", err)
	}
	// Method-qualified idempotency: an update key reused by stop.
	_, err = b.Stop(bg, protocol.StopParams{Mode: "drain", IfGeneration: 1, IdempotencyKey: "s"})
	expectCode(t, err, protocol.IdempotencyReuse)
	d, err := b.Update(bg, protocol.UpdateParams{HasLabels: true, Labels: map[string]string{"b": "2", "a": "1"}, Suspended: ptr(true), IfGeneration: 1, IdempotencyKey: "s"})
	if err != nil || !d.Deduped || d.AtCursor != "cursor-5" || d.Operational.DispatchState != "suspended" {
		t.Fatalf("replay: %v %s", err, mustJSON(t, d))
	}
}

func TestStopDrainWaitsForLeasesAndFinishesOnce(t *testing.T) {
	b := running(t)
	e := drive(t, b, "local")
	x1, x2 := e.mustDispatch(), e.mustDispatch()
	r, err := b.Stop(bg, protocol.StopParams{Mode: "drain", IfGeneration: 1, IdempotencyKey: "d"})
	if err != nil || r.Phase != "running" || mustJSON(t, r.Operational) != `{"labels":{},"logLevel":"info","dispatchState":"draining","stopMode":"drain","inFlight":2}` {
		t.Fatalf("%v %s", err, mustJSON(t, r))
	}
	// Update is rejected while draining; drain again appends another record.
	_, err = b.Update(bg, protocol.UpdateParams{LogLevel: ptr("warn"), IfGeneration: 1, IdempotencyKey: "u"})
	expectCode(t, err, protocol.InvalidPhase)
	if _, err := b.Stop(bg, protocol.StopParams{Mode: "drain", IfGeneration: 1, IdempotencyKey: "d2"}); err != nil {
		t.Fatal(err)
	}
	if err := e.settle(x1, worker.Outcome{Status: "verified", Output: json.RawMessage(`{"x":1}`)}); err != nil {
		t.Fatal(err)
	}
	g, _ := b.Get(bg, protocol.GetParams{})
	if g.Status.Phase != "running" {
		t.Fatal("finished with a lease in flight")
	}
	if err := e.fail(x2); err != nil {
		t.Fatal(err)
	}
	g, _ = b.Get(bg, protocol.GetParams{})
	if mustJSON(t, g.Status) != `{"phase":"finished","observedGeneration":1,"currentRunId":"run-1","atCursor":"cursor-8","operational":{"labels":{},"logLevel":"info","dispatchState":"stopped","stopMode":"drain","inFlight":0}}` {
		t.Fatal(mustJSON(t, g.Status))
	}
	ns := nextN(t, watchAll(t, b, "run-1").Stream, 8)
	if got := eventTypes(ns); got != "phase,node_begin,node_begin,phase,phase,node_end,node_end,finished" {
		t.Fatalf("events %s", got)
	}
	if !strings.Contains(string(ns[7].Rest), `"stop_mode":"drain"`) {
		t.Fatalf("finished: %s", ns[7].Rest)
	}
	// Late settlements are rejected.
	if err := e.succeed(x1); !errors.Is(err, engine.ErrStale) {
		t.Fatalf("late completion: %v", err)
	}
	_, err = b.Stop(bg, protocol.StopParams{Mode: "force", IfGeneration: 1, IdempotencyKey: "f"})
	if errDetails(err) != `{"currentPhase":"finished"}` {
		t.Fatalf("stop finished: %v", err)
	}
}

func TestStopForceVoidsLeasesAndEscalatesDrain(t *testing.T) {
	b := running(t)
	e := drive(t, b, "local")
	x1, x2 := e.mustDispatch(), e.mustDispatch()
	if _, err := b.Stop(bg, protocol.StopParams{Mode: "drain", IfGeneration: 1, IdempotencyKey: "d"}); err != nil {
		t.Fatal(err)
	}
	r, err := b.Stop(bg, protocol.StopParams{Mode: "force", IfGeneration: 1, IdempotencyKey: "f"})
	if err != nil || r.Phase != "finished" || r.EffectiveMode != "force" || r.AtCursor != "cursor-8" || r.Operational.StopMode != "force" {
		t.Fatalf("%v %s", err, mustJSON(t, r))
	}
	// The engine sees the run gone, and a settlement of a cut-off
	// execution is refused.
	if runs, err := e.l.Running(bg); err != nil || len(runs) != 0 {
		t.Fatalf("still running: %v %v", runs, err)
	}
	for _, x := range []uint64{x1, x2} {
		if err := e.succeed(x); !errors.Is(err, engine.ErrStale) {
			t.Fatalf("completion after void: %v", err)
		}
	}
	ns := nextN(t, watchAll(t, b, "run-1").Stream, 8)
	if got := eventTypes(ns); got != "phase,node_begin,node_begin,phase,phase,bookmark,bookmark,finished" {
		t.Fatalf("events %s", got)
	}
	// No verified output was fabricated for the voided turns.
	for _, n := range ns {
		if strings.Contains(string(n.Rest), "verified") {
			t.Fatalf("fabricated outcome: %s", n.Rest)
		}
	}
}

func TestRetryDispositions(t *testing.T) {
	empty := cluster.NewFixture(cluster.Isolated)
	_, err := empty.Retry(bg, protocol.RetryParams{IfGeneration: 0, IdempotencyKey: "r"})
	if errDetails(err) != `{"dispatchState":"stopped"}` {
		t.Fatalf("empty: %v", err)
	}
	b := running(t)
	retry := func(key string) (*protocol.RetryResult, error) {
		return b.Retry(bg, protocol.RetryParams{IfGeneration: 1, IdempotencyKey: key})
	}
	_, err = retry("r1")
	if errDetails(err) != `{"reason":"exhausted"}` || err.(*protocol.Error).Message != protocol.MsgNoFrontier {
		t.Fatalf("fresh: %v", err)
	}
	e := drive(t, b, "local")
	x := e.mustDispatch()
	_, err = retry("r2")
	if errDetails(err) != `{"reason":"active"}` {
		t.Fatalf("active: %v", err)
	}
	if err := e.succeed(x); err != nil {
		t.Fatal(err)
	}
	_, err = retry("r3")
	if errDetails(err) != `{"reason":"success"}` {
		t.Fatalf("success: %v", err)
	}
	e.failAndHold(e.mustDispatch())
	r, err := retry("r4")
	if err != nil || r.RetriedTurnID != "x2" || r.RetryTurnID != "retry-1" || r.RunID != "run-1" || r.Generation != 1 {
		t.Fatalf("retry: %v %+v", err, r)
	}
	_, err = retry("r5")
	if errDetails(err) != `{"reason":"consumed"}` {
		t.Fatalf("pending: %v", err)
	}
	// Dispatching after the retry clears the reservation; a failure the
	// run does not hold on is no frontier.
	if err := e.fail(e.mustDispatch()); err != nil {
		t.Fatal(err)
	}
	_, err = retry("r6")
	if errDetails(err) != `{"reason":"exhausted"}` {
		t.Fatalf("exhausted: %v", err)
	}
	if _, err := b.Stop(bg, protocol.StopParams{Mode: "force", IfGeneration: 1, IdempotencyKey: "f"}); err != nil {
		t.Fatal(err)
	}
	_, err = retry("r8")
	if errDetails(err) != `{"currentPhase":"finished"}` {
		t.Fatalf("finished: %v", err)
	}
	_, err = b.Retry(bg, protocol.RetryParams{IfGeneration: 4, IdempotencyKey: "r9"})
	expectCode(t, err, protocol.GenerationConflict)
	// Replay of a successful retry after the run finished.
	d, err := retry("r4")
	if err != nil || !d.Deduped || d.RetryTurnID != "retry-1" {
		t.Fatalf("replay: %v", err)
	}
}

func TestResubmitRules(t *testing.T) {
	b := running(t)
	rs := func(key, run string, repl protocol.Value) (*protocol.ResubmitResult, error) {
		p := protocol.ResubmitParams{IfGeneration: 1, IfRunID: run, IdempotencyKey: key}
		if repl != nil {
			p.ReplacementInput, p.HasReplacement = repl, true
		}
		return b.Resubmit(bg, p)
	}
	_, err := rs("a", "run-1", nil)
	if errDetails(err) != `{"currentPhase":"running"}` {
		t.Fatalf("running: %v", err)
	}
	if _, err := b.Stop(bg, protocol.StopParams{Mode: "force", IfGeneration: 1, IdempotencyKey: "f"}); err != nil {
		t.Fatal(err)
	}
	_, err = rs("b", "run-9", nil)
	if errCode(err) != protocol.RunConflict || errDetails(err) != `{"currentRunId":"run-1"}` {
		t.Fatalf("run CAS: %v", err)
	}
	_, err = rs("c", "run-1", protocol.Value(`5`))
	if errDetails(err) != `{"reason":"$ must be a null"}` {
		t.Fatalf("replacement: %v", err)
	}
	r, err := rs("d", "run-1", protocol.Null)
	if err != nil || mustJSON(t, r) != `{"generation":1,"priorRunId":"run-1","runId":"run-2","phase":"running","operational":{"labels":{},"logLevel":"info","dispatchState":"active","inFlight":0},"atCursor":"cursor-4","deduped":false}` {
		t.Fatalf("%v %s", err, mustJSON(t, r))
	}
	// The prior run's history stays readable.
	if got := eventTypes(nextN(t, watchAll(t, b, "run-1").Stream, 3)); got != "phase,phase,finished" {
		t.Fatal(got)
	}
	n := nextN(t, watchAll(t, b, "run-2").Stream, 1)
	if !strings.Contains(string(n[0].Rest), `"admission":{"runId":"run-2"`) {
		t.Fatal(string(n[0].Rest))
	}
	empty := cluster.NewFixture(cluster.Isolated)
	_, err = empty.Resubmit(bg, protocol.ResubmitParams{IfGeneration: 0, IfRunID: "run-1", IdempotencyKey: "x"})
	if errDetails(err) != `{"currentRunId":null}` {
		t.Fatalf("empty: %v", err)
	}
}

func TestDeleteRules(t *testing.T) {
	empty := cluster.NewFixture(cluster.Isolated)
	r, err := empty.Delete(bg, protocol.DeleteParams{IfGeneration: 0, IdempotencyKey: "e"})
	if err != nil || mustJSON(t, r) != `{"deleted":false,"phase":"empty","deduped":false}` {
		t.Fatalf("empty: %v", err)
	}
	b := running(t)
	_, err = b.Delete(bg, protocol.DeleteParams{IfGeneration: 1, IfRunID: ptr("run-1"), IdempotencyKey: "d0"})
	if errDetails(err) != `{"currentPhase":"running"}` {
		t.Fatalf("running: %v", err)
	}
	if _, err := b.Stop(bg, protocol.StopParams{Mode: "drain", IfGeneration: 1, IdempotencyKey: "s"}); err != nil {
		t.Fatal(err)
	}
	_, err = b.Delete(bg, protocol.DeleteParams{IfGeneration: 1, IdempotencyKey: "d1"})
	if errDetails(err) != `{"currentRunId":"run-1"}` {
		t.Fatalf("missing ifRunId: %v", err)
	}
	_, err = b.Delete(bg, protocol.DeleteParams{IfGeneration: 0, IfRunID: ptr("run-1"), IdempotencyKey: "d2"})
	expectCode(t, err, protocol.GenerationConflict)
	r, err = b.Delete(bg, protocol.DeleteParams{IfGeneration: 1, IfRunID: ptr("run-1"), IdempotencyKey: "d3"})
	if err != nil || !r.Deleted {
		t.Fatalf("delete: %v", err)
	}
	_, err = b.Watch(bg, protocol.WatchParams{RunID: ptr("run-1")})
	if errCode(err) != protocol.Gone || errDetails(err) != `{"tombstonedAt":"cursor-3"}` || err.(*protocol.Error).Message != protocol.MsgRunGone {
		t.Fatalf("watch deleted: %v %s", err, errDetails(err))
	}
	a, err := b.Apply(bg, applyP(goldenGraph, "again", ptr(int64(0))))
	if err != nil || *a.Generation != 1 || *a.RunID != "run-2" {
		t.Fatalf("apply after delete: %v", err)
	}
	// Receipts survive deletion.
	d, err := b.Apply(bg, applyP(goldenGraph, "create", ptr(int64(0))))
	if err != nil || !d.Deduped || *d.RunID != "run-1" {
		t.Fatalf("receipt after delete: %v", err)
	}
	d3, err := b.Delete(bg, protocol.DeleteParams{IfGeneration: 1, IfRunID: ptr("run-1"), IdempotencyKey: "d3"})
	if err != nil || !d3.Deduped || !d3.Deleted {
		t.Fatalf("delete replay: %v", err)
	}
}

func TestDeletePendingCleanupHoldsDeleting(t *testing.T) {
	b := running(t)
	e := drive(t, b, "local")
	if err := b.HoldCleanup(bg, "local"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stop(bg, protocol.StopParams{Mode: "force", IfGeneration: 1, IdempotencyKey: "s"}); err != nil {
		t.Fatal(err)
	}
	r, err := b.Delete(bg, protocol.DeleteParams{IfGeneration: 1, IfRunID: ptr("run-1"), IdempotencyKey: "d"})
	if err != nil || mustJSON(t, r) != `{"deleted":false,"phase":"deleting","generation":1,"runId":"run-1","atCursor":"cursor-3","deduped":false}` {
		t.Fatalf("%v %s", err, mustJSON(t, r))
	}
	g, _ := b.Get(bg, protocol.GetParams{})
	if g.Status.Phase != "deleting" || *g.Status.CurrentRunID != "run-1" {
		t.Fatal(mustJSON(t, g))
	}
	// The fence: apply, resubmit, retry, dispatch and a competing delete fail.
	_, err = b.Apply(bg, applyP(graphWith(3), "a", nil))
	expectCode(t, err, protocol.InvalidPhase)
	_, err = b.Resubmit(bg, protocol.ResubmitParams{IfGeneration: 1, IfRunID: "run-1", IdempotencyKey: "r"})
	expectCode(t, err, protocol.InvalidPhase)
	_, err = b.Retry(bg, protocol.RetryParams{IfGeneration: 1, IdempotencyKey: "rt"})
	if errDetails(err) != `{"dispatchState":"stopped"}` {
		t.Fatal(err)
	}
	_, err = b.Delete(bg, protocol.DeleteParams{IfGeneration: 1, IfRunID: ptr("run-1"), IdempotencyKey: "d-other"})
	if errDetails(err) != `{"currentPhase":"deleting"}` {
		t.Fatal(err)
	}
	if _, err := e.dispatch("worker", protocol.Null); !errors.Is(err, engine.ErrStale) {
		t.Fatal(err)
	}
	if err := b.ConfirmCleanup(bg, "local"); err != nil {
		t.Fatal(err)
	}
	if got := getJSON(t, b, bg); !strings.HasPrefix(got, `{"spec":null,"status":{"phase":"empty"`) {
		t.Fatal(got)
	}
	_, err = b.Watch(bg, protocol.WatchParams{RunID: ptr("run-1")})
	expectCode(t, err, protocol.Gone)
}

// Lifecycle routing through the wire, with the dispatcher's param rules.
func TestLifecycleDispatchRoutesAndRejectsMutationFields(t *testing.T) {
	b := running(t)
	w := dial(t, b, identity.Local())
	for _, c := range []struct{ req, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"update","params":{"ifGeneration":1,"idempotencyKey":"u"}}`, `"code":"SCHEMA_VIOLATION"`},
		{`{"jsonrpc":"2.0","id":2,"method":"update","params":{"ifGeneration":1,"idempotencyKey":"u","graph":{}}}`, `"code":"SCHEMA_VIOLATION"`},
		{`{"jsonrpc":"2.0","id":3,"method":"retry","params":{"ifGeneration":1,"idempotencyKey":"u","turnId":"x"}}`, `"code":"SCHEMA_VIOLATION"`},
		{`{"jsonrpc":"2.0","id":4,"method":"delete","params":{"ifGeneration":1,"provider":"x","idempotencyKey":"u"}}`, `"code":"SCHEMA_VIOLATION"`},
		{`{"jsonrpc":"2.0","id":5,"method":"resubmit","params":{"ifGeneration":1,"idempotencyKey":"u"}}`, `"code":"SCHEMA_VIOLATION"`},
		{`{"jsonrpc":"2.0","id":6,"method":"update","params":{"ifGeneration":1,"idempotencyKey":"u","suspended":true}}`, `{"jsonrpc":"2.0","id":6,"result":{"generation":1,"runId":"run-1","phase":"running","operational":{"labels":{},"logLevel":"info","dispatchState":"suspended","inFlight":0},"atCursor":"cursor-2","deduped":false}}`},
		{`{"jsonrpc":"2.0","id":7,"method":"stop","params":{"ifGeneration":1,"idempotencyKey":"s","mode":"drain"}}`, `"effectiveMode":"drain","operational":{"labels":{},"logLevel":"info","dispatchState":"stopped","stopMode":"drain","inFlight":0},"atCursor":"cursor-4"`},
		{`{"jsonrpc":"2.0","id":8,"method":"delete","params":{"ifGeneration":1,"idempotencyKey":"x"}}`, `{"jsonrpc":"2.0","id":8,"error":{"code":-32000,"message":"Run precondition failed","data":{"code":"RUN_CONFLICT","details":{"currentRunId":"run-1"}}}}`},
		{`{"jsonrpc":"2.0","id":9,"method":"retry","params":{"ifGeneration":1,"idempotencyKey":"y"}}`, `{"jsonrpc":"2.0","id":9,"error":{"code":-32000,"message":"Cluster phase does not admit apply","data":{"code":"INVALID_PHASE","details":{"currentPhase":"finished"}}}}`},
	} {
		if got := w.call(c.req); !strings.Contains(got, c.want) {
			t.Fatalf("%s\n got  %s\n want %s", c.req, got, c.want)
		}
	}
}
