package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/protocol"
)

// A graph that decodes but fails structural verification.
const dupGraph = `{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":{"policy":"policy.default@1","default":"deny"},"root":{"kind":"seq","name":"root","state":{"kind":"record","fields":{}},"children":[{"kind":"step","name":"a","worker":"w.x@1","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":1,"attempts":1},{"kind":"step","name":"a","worker":"w.x@1","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":1,"attempts":1}],"promotedStatePaths":[]}}`

var bg = ctxFor("local")

func getJSON(t *testing.T, b *cluster.Backend, ctx context.Context) string {
	t.Helper()
	r, err := b.Get(ctx, protocol.GetParams{})
	if err != nil {
		t.Fatal(err)
	}
	return mustJSON(t, r)
}

func TestPlanIsPureForApproveAndReject(t *testing.T) {
	b := cluster.NewFixture(cluster.Isolated)
	before := getJSON(t, b, bg)
	r, err := b.Plan(bg, protocol.PlanParams{Graph: json.RawMessage(goldenGraph)})
	if err != nil || !r.OK {
		t.Fatalf("plan: %v %+v", err, r)
	}
	r, err = b.Plan(bg, protocol.PlanParams{Graph: json.RawMessage(dupGraph)})
	if err != nil || r.OK || r.Bounds != nil || !strings.Contains(string(r.Diagnostics), "duplicate node name a") {
		t.Fatalf("plan reject: %v %s", err, mustJSON(t, r))
	}
	if got := mustJSON(t, r); !strings.HasPrefix(got, `{"ok":false,"diagnostics":[{`) || strings.Contains(got, "bounds") {
		t.Fatalf("rejected plan shape: %s", got)
	}
	if getJSON(t, b, bg) != before {
		t.Fatal("plan changed state")
	}
	_, err = b.Plan(bg, protocol.PlanParams{Graph: json.RawMessage(`{"profile":"nope"}`)})
	if pe, ok := err.(*protocol.Error); !ok || pe.Code != protocol.CodeInvalidParams || pe.DataCode != protocol.SchemaViolation || pe.Details != nil {
		t.Fatalf("undecodable graph: %v", err)
	}
}

func TestPlanRejectedSerializesWithoutBounds(t *testing.T) {
	b := cluster.New(cluster.Config{Verifier: cluster.VerifierFunc(func(context.Context, *graph.GraphSpec) (cluster.Verdict, error) {
		return cluster.Verdict{}, nil
	})})
	r, err := b.Plan(bg, protocol.PlanParams{Graph: json.RawMessage(goldenGraph)})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, r); got != `{"ok":false,"diagnostics":[]}` {
		t.Fatalf("got %s", got)
	}
}

func TestDryRunDiffsWithoutWritesAndChecksModeBeforeVerify(t *testing.T) {
	verified := 0
	b := cluster.New(cluster.Config{Verifier: cluster.VerifierFunc(func(ctx context.Context, g *graph.GraphSpec) (cluster.Verdict, error) {
		verified++
		return cluster.StructuralVerifier{}.Verify(ctx, g)
	})})
	// Mode rules come before verification.
	_, err := b.Apply(bg, protocol.ApplyParams{Graph: json.RawMessage(goldenGraph), DryRun: true, HasInput: true, Input: protocol.Null})
	if errDetails(err) != `{"reason":"dry-run apply must omit input"}` || verified != 0 {
		t.Fatalf("dry run with input: %v %s verified=%d", err, errDetails(err), verified)
	}
	_, err = b.Apply(bg, protocol.ApplyParams{Graph: json.RawMessage(goldenGraph)})
	if errDetails(err) != `{"reason":"committed apply requires idempotencyKey"}` || verified != 0 {
		t.Fatalf("commit without key: %v", err)
	}
	r, err := b.Apply(bg, protocol.ApplyParams{Graph: json.RawMessage(goldenGraph), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, r); got != `{"generation":null,"runId":null,"phase":"empty","deduped":false,"diff":{"added":["worker"],"removed":[],"changed":[]}}` {
		t.Fatalf("dry run on empty: %s", got)
	}
	if _, err := b.Apply(bg, applyP(goldenGraph, "k1", ptr(int64(0)))); err != nil {
		t.Fatal(err)
	}
	before := getJSON(t, b, bg)
	r, err = b.Apply(bg, protocol.ApplyParams{Graph: json.RawMessage(graphWith(5)), DryRun: true, IfGeneration: ptr(int64(1))})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, r); got != `{"generation":1,"runId":"run-1","phase":"running","deduped":false,"diff":{"added":[],"removed":[],"changed":["worker"]}}` {
		t.Fatalf("dry run change: %s", got)
	}
	_, err = b.Apply(bg, protocol.ApplyParams{Graph: json.RawMessage(goldenGraph), DryRun: true, IfGeneration: ptr(int64(3))})
	expectCode(t, err, protocol.GenerationConflict)
	if getJSON(t, b, bg) != before {
		t.Fatal("dry run wrote")
	}
}

func TestCommittedApplyCreatesChangesAndDedups(t *testing.T) {
	b := cluster.NewFixture(cluster.Isolated)
	r1, err := b.Apply(bg, applyP(goldenGraph, "create", ptr(int64(0))))
	if err != nil || mustJSON(t, r1) != `{"generation":1,"runId":"run-1","phase":"running","deduped":false}` {
		t.Fatalf("create: %v %s", err, mustJSON(t, r1))
	}
	// Unchanged: receipt only, no cursor; input is rejected.
	_, err = b.Apply(bg, applyP(goldenGraph, "same-with-input", nil))
	if errDetails(err) != `{"reason":"unchanged apply must omit input; use resubmit to supply a new root input"}` {
		t.Fatalf("unchanged with input: %v", err)
	}
	key := "same"
	r2, err := b.Apply(bg, protocol.ApplyParams{Graph: json.RawMessage(goldenGraph), IdempotencyKey: &key})
	if err != nil || mustJSON(t, r2) != `{"generation":1,"runId":"run-1","phase":"running","deduped":false}` {
		t.Fatalf("unchanged: %v %s", err, mustJSON(t, r2))
	}
	g, _ := b.Get(bg, protocol.GetParams{})
	if *g.AtCursor != "cursor-1" {
		t.Fatalf("unchanged apply allocated a cursor: %s", *g.AtCursor)
	}
	// Changed: needs input, validated against initialInput.
	k := "change-no-input"
	_, err = b.Apply(bg, protocol.ApplyParams{Graph: json.RawMessage(graphWith(7)), IdempotencyKey: &k})
	if errDetails(err) != `{"reason":"apply that starts a run requires input"}` {
		t.Fatalf("changed without input: %v", err)
	}
	bad := applyP(graphWith(7), "bad-input", nil)
	bad.Input = protocol.Value(`{"a":1}`)
	_, err = b.Apply(bg, bad)
	if errDetails(err) != `{"reason":"$ must be a null"}` {
		t.Fatalf("bad input: %v %s", err, errDetails(err))
	}
	r3, err := b.Apply(bg, applyP(graphWith(7), "change", ptr(int64(1))))
	if err != nil || mustJSON(t, r3) != `{"generation":2,"runId":"run-2","phase":"running","deduped":false}` {
		t.Fatalf("change: %v %s", err, mustJSON(t, r3))
	}
	// Replays return the original receipts even though state moved on.
	d1, err := b.Apply(bg, applyP(goldenGraph, "create", ptr(int64(0))))
	if err != nil || mustJSON(t, d1) != `{"generation":1,"runId":"run-1","phase":"running","deduped":true}` {
		t.Fatalf("replay: %v %s", err, mustJSON(t, d1))
	}
	// CAS failure preserves the snapshot.
	before := getJSON(t, b, bg)
	_, err = b.Apply(bg, applyP(graphWith(9), "stale", ptr(int64(1))))
	expectCode(t, err, protocol.GenerationConflict)
	if errDetails(err) != `{"currentGeneration":2}` {
		t.Fatalf("details %s", errDetails(err))
	}
	if getJSON(t, b, bg) != before {
		t.Fatal("rejected apply changed state")
	}
	// A rejected request recorded no receipt: the key is still free.
	if _, err := b.Apply(bg, applyP(graphWith(9), "stale", ptr(int64(2)))); err != nil {
		t.Fatal(err)
	}
}

func TestNullInputAndOmittedInputConflict(t *testing.T) {
	b := cluster.NewFixture(cluster.Isolated)
	if _, err := b.Apply(bg, applyP(goldenGraph, "k", nil)); err != nil {
		t.Fatal(err)
	}
	k := "k"
	_, err := b.Apply(bg, protocol.ApplyParams{Graph: json.RawMessage(goldenGraph), IdempotencyKey: &k})
	expectCode(t, err, protocol.IdempotencyReuse)
	if pe := err.(*protocol.Error); pe.Details != nil || pe.Message != protocol.MsgIdempotencyReuse {
		t.Fatalf("reuse error %+v", pe)
	}
	// Key order and graph key order do not matter.
	reordered := `{"root":{"attempts":1,"writeBindings":[],"timeoutMs":1000,"output":{"kind":"null"},"name":"worker","kind":"step","input":{"kind":"null"},"inputBindings":[],"worker":"legacy.zeroshot.ship@1"},"profile":"openengine.graph.single-worker/v1","policy":{"default":"deny","policy":"policy.default@1"},"initialInput":{"kind":"null"}}`
	r, err := b.Apply(bg, applyP(reordered, "k", nil))
	if err != nil || !r.Deduped {
		t.Fatalf("reordered replay: %v %+v", err, r)
	}
}

func TestVerifierRejectionAndInternalFailure(t *testing.T) {
	b := cluster.NewFixture(cluster.Isolated)
	_, err := b.Apply(bg, applyP(dupGraph, "dup", nil))
	expectCode(t, err, protocol.GraphInvalid)
	if pe := err.(*protocol.Error); pe.Message != protocol.MsgGraphInvalid || !strings.HasPrefix(string(pe.Details), `{"diagnostics":[{"code":"invalid_graph_shape"`) {
		t.Fatalf("%+v %s", pe, pe.Details)
	}
	failing := cluster.New(cluster.Config{Verifier: cluster.VerifierFunc(func(context.Context, *graph.GraphSpec) (cluster.Verdict, error) {
		return cluster.Verdict{}, errors.New("secret registry path /etc/x")
	})})
	_, err = failing.Apply(bg, applyP(goldenGraph, "k", nil))
	if pe, ok := err.(*protocol.Error); !ok || pe.Code != protocol.CodeInternalError || pe.Details != nil || strings.Contains(pe.Message, "secret") {
		t.Fatalf("internal failure not redacted: %v", err)
	}
	// Through the wire too.
	w := dial(t, failing, identity.Local())
	if got := w.call(`{"jsonrpc":"2.0","id":1,"method":"plan","params":{"graph":` + goldenGraph + `}}`); got != `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":{"code":"INTERNAL_ERROR"}}}` {
		t.Fatalf("wire: %s", got)
	}
}

// cancellingVerifier cancels the request after verification, i.e. before
// the commit.
func cancellingVerifier(cancel context.CancelFunc) cluster.Verifier {
	return cluster.VerifierFunc(func(ctx context.Context, g *graph.GraphSpec) (cluster.Verdict, error) {
		cancel()
		return cluster.StructuralVerifier{}.Verify(ctx, g)
	})
}

func TestCancellationBeforeCreateHasZeroEffects(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	b := cluster.New(cluster.Config{Verifier: cancellingVerifier(cancel)})
	_, err := b.Apply(ctx, applyP(goldenGraph, "k", nil))
	expectCode(t, err, protocol.Cancelled)
	if got := getJSON(t, b, bg); got != `{"spec":null,"status":{"phase":"empty","observedGeneration":null,"currentRunId":null,"atCursor":null},"atCursor":null}` {
		t.Fatalf("effects after cancel: %s", got)
	}
	// The key was not consumed and no run/cursor number was burnt.
	b2 := cluster.New(cluster.Config{Store: b.Store()})
	r, err := b2.Apply(bg, applyP(goldenGraph, "k", nil))
	if err != nil || *r.RunID != "run-1" {
		t.Fatalf("after cancel: %v %+v", err, r)
	}
}

func TestCancellationRestoresExistingRunAndReplaysAfterCommit(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	var armed bool
	b := cluster.New(cluster.Config{Verifier: cluster.VerifierFunc(func(c context.Context, g *graph.GraphSpec) (cluster.Verdict, error) {
		if armed {
			cancel()
		}
		return cluster.StructuralVerifier{}.Verify(c, g)
	})})
	if _, err := b.Apply(bg, applyP(goldenGraph, "first", nil)); err != nil {
		t.Fatal(err)
	}
	before := getJSON(t, b, bg)
	armed = true
	_, err := b.Apply(ctx, applyP(graphWith(3), "second", nil))
	expectCode(t, err, protocol.Cancelled)
	armed = false
	if getJSON(t, b, bg) != before {
		t.Fatal("cancelled apply changed the run")
	}
	// A committed apply is not rolled back by a later cancel: its replay
	// returns the receipt.
	r, err := b.Apply(bg, applyP(goldenGraph, "first", nil))
	if err != nil || !r.Deduped {
		t.Fatalf("replay: %v %+v", err, r)
	}
}

func TestApplyPhaseRules(t *testing.T) {
	b := cluster.NewFixture(cluster.Isolated)
	if _, err := b.Apply(bg, applyP(goldenGraph, "a", nil)); err != nil {
		t.Fatal(err)
	}
	// Executions in flight block a changed apply but not an unchanged one.
	r := drive(t, b, "local")
	x := r.mustDispatch()
	_, err := b.Apply(bg, applyP(graphWith(2), "b", nil))
	expectCode(t, err, protocol.InvalidPhase)
	if errDetails(err) != `{"currentPhase":"running"}` {
		t.Fatal(errDetails(err))
	}
	k := "c"
	if _, err := b.Apply(bg, protocol.ApplyParams{Graph: json.RawMessage(goldenGraph), IdempotencyKey: &k}); err != nil {
		t.Fatalf("unchanged with lease: %v", err)
	}
	if err := r.succeed(x); err != nil {
		t.Fatal(err)
	}
	// Suspended: apply is rejected, changed or not.
	if _, err := b.Update(bg, protocol.UpdateParams{Suspended: ptr(true), IfGeneration: 1, IdempotencyKey: "s"}); err != nil {
		t.Fatal(err)
	}
	_, err = b.Apply(bg, applyP(graphWith(2), "d", nil))
	expectCode(t, err, protocol.InvalidPhase)
	k = "e"
	_, err = b.Apply(bg, protocol.ApplyParams{Graph: json.RawMessage(goldenGraph), IdempotencyKey: &k})
	expectCode(t, err, protocol.InvalidPhase)
	// Finished: rejected.
	if _, err := b.Stop(bg, protocol.StopParams{Mode: "force", IfGeneration: 1, IdempotencyKey: "f"}); err != nil {
		t.Fatal(err)
	}
	_, err = b.Apply(bg, applyP(graphWith(2), "g", nil))
	expectCode(t, err, protocol.InvalidPhase)
	if errDetails(err) != `{"currentPhase":"finished"}` {
		t.Fatal(errDetails(err))
	}
}

func TestGetAtCursor(t *testing.T) {
	b := cluster.NewFixture(cluster.Isolated)
	_, err := b.Get(bg, protocol.GetParams{AtCursor: ptr("cursor-1")})
	if errCode(err) != protocol.InvalidPhase || errDetails(err) != `{"currentCursor":null}` || err.(*protocol.Error).Message != protocol.MsgCursorUnavailable {
		t.Fatalf("empty: %v %s", err, errDetails(err))
	}
	if _, err := b.Apply(bg, applyP(goldenGraph, "a", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(bg, protocol.GetParams{AtCursor: ptr("cursor-1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(bg, protocol.UpdateParams{LogLevel: ptr("warn"), IfGeneration: 1, IdempotencyKey: "u"}); err != nil {
		t.Fatal(err)
	}
	_, err = b.Get(bg, protocol.GetParams{AtCursor: ptr("cursor-1")})
	if errDetails(err) != `{"currentCursor":"cursor-2"}` {
		t.Fatalf("stale: %v %s", err, errDetails(err))
	}
}

func TestInitializeCapabilities(t *testing.T) {
	fx, err := cluster.NewFixture(cluster.Isolated).Initialize(bg)
	if err != nil || mustJSON(t, fx.Capabilities) != `{"graphProfiles":[],"logs":false,"agentAttach":false}` {
		t.Fatalf("fixture: %v %s", err, mustJSON(t, fx.Capabilities))
	}
	def, err := cluster.New(cluster.Config{
		GraphProfiles: []string{protocol.ProfileFull, protocol.ProfileSingleWorker}, Logs: true, AgentAttach: true,
	}).Initialize(bg)
	if err != nil || mustJSON(t, def.Capabilities) != `{"graphProfiles":["openengine.graph.full/v1","openengine.graph.single-worker/v1"],"logs":true,"agentAttach":true}` {
		t.Fatalf("default: %v %s", err, mustJSON(t, def.Capabilities))
	}
	// Unadvertised capabilities are not served.
	_, err = cluster.NewFixture(cluster.Isolated).Logs(bg, protocol.LogsParams{})
	if pe, ok := err.(*protocol.Error); !ok || pe.Message != "Backend does not support logs" {
		t.Fatalf("logs: %v", err)
	}
	_, err = cluster.NewFixture(cluster.Isolated).AgentAttach(bg, protocol.AgentAttachParams{Execution: "e"})
	if pe, ok := err.(*protocol.Error); !ok || pe.Message != "Backend does not support agent attach" {
		t.Fatalf("attach: %v", err)
	}
}
