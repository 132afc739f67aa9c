package capsule_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/protocol"
)

// recorder keeps, per run, the ledger snapshot the supervisor finishes
// from: the run's complete recorded history (Finish requires no open
// execution), read in the last moment Snapshot still serves it.
type recorder struct {
	engine.Ledger
	mu    sync.Mutex
	snaps map[string]*engine.Snapshot
}

func newRecorder() *recorder { return &recorder{snaps: map[string]*engine.Snapshot{}} }

func (r *recorder) wrap(l engine.Ledger) engine.Ledger { r.Ledger = l; return r }

func (r *recorder) Finish(ctx context.Context, ref engine.RunRef, t reduce.Terminal) error {
	snap, err := r.Ledger.Snapshot(ctx, ref)
	if err != nil {
		return err
	}
	// Kept before the commit: a waiter sees the finish as soon as it commits.
	r.mu.Lock()
	r.snaps[ref.RunID] = snap
	r.mu.Unlock()
	return r.Ledger.Finish(ctx, ref, t)
}

func (r *recorder) snapshot(runID string) *engine.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snaps[runID]
}

func canon(t testing.TB, raw []byte) string {
	t.Helper()
	if len(raw) == 0 {
		raw = []byte("null")
	}
	v, err := protocol.NormalizeValue(raw)
	if err != nil {
		t.Fatalf("normalize %s: %v", raw, err)
	}
	return string(v)
}

// checkReplay asserts that (1) the recorded history is what watchers saw:
// every execution's dispatch, settlement or void is the event at its
// ledger position, and there are no other node events; and (2) reducing
// the history again yields get's terminal result.
func checkReplay(t *testing.T, e *env, rec *recorder, runID string) {
	t.Helper()
	got := e.waitFinished()
	es := e.history(runID)
	snap := rec.snapshot(runID)
	if snap == nil {
		t.Fatalf("run %s finished without a terminal:%s", runID, es)
	}
	at := map[uint64]event{}
	for _, ev := range es {
		seq, err := strconv.ParseUint(strings.TrimPrefix(ev.Cursor, "cursor-"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		at[seq] = ev
	}
	h := snap.History
	all := append(slices.Clone(h.Ended), h.Executions...)
	if n := len(es.of(protocol.EventNodeBegin, "")); n != len(all) {
		t.Fatalf("%d node_begin events, %d recorded executions:%s", n, len(all), es)
	}
	for _, x := range all {
		b := at[x.DispatchPosition]
		if b.Event.Type != protocol.EventNodeBegin || b.Event.Node.Node != x.Occurrence.Node || uint64(b.Event.Node.Attempt) != x.Attempt || canon(t, b.Event.Input) != canon(t, x.Input) {
			t.Fatalf("execution %d (%s#%d) dispatched at %d, event there: %s", x.Execution, x.Occurrence.Node, x.Attempt, x.DispatchPosition, b)
		}
		end := at[x.Position]
		switch x.State {
		case reduce.StateSettled:
			o := end.outcome(t)
			if end.Event.Type != protocol.EventNodeEnd || end.Event.Node.Node != x.Occurrence.Node || o.Status != string(x.Outcome.Status) || o.Code != x.Outcome.Code || canon(t, o.Output) != canon(t, x.Outcome.Output) || fmt.Sprint(o.Signals) != fmt.Sprint(x.Outcome.Signals) {
				t.Fatalf("execution %d settled at %d, event there: %s", x.Execution, x.Position, end)
			}
		case reduce.StateVoided:
			if end.Event.Type != protocol.EventFault || end.fault(t).Consequence != "no_observable_effect" {
				t.Fatalf("execution %d voided at %d, event there: %s", x.Execution, x.Position, end)
			}
		default:
			t.Fatalf("execution %d still %s at finish", x.Execution, x.State)
		}
	}
	res, err := reduce.Reduce(snap.Spec, snap.Seed, h)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if res.Terminal == nil || len(res.Dispatches()) != 0 || len(res.Voids()) != 0 {
		t.Fatalf("replay is not final: %s", mustJSON(t, res.Decisions))
	}
	tr := got.TerminalResult
	if tr == nil || tr.Status != string(res.Terminal.Status) || tr.Reason != res.Terminal.Reason ||
		(tr.Output != nil) != (res.Terminal.Status == reduce.TerminalSucceeded) ||
		(tr.Output != nil && canon(t, *tr.Output) != canon(t, res.Terminal.Output)) {
		t.Fatalf("get says %s, replay says %s", mustJSON(t, tr), mustJSON(t, res.Terminal))
	}
}

// TestReplayExamples: every example's recorded history reduces to its
// terminal result.
func TestReplayExamples(t *testing.T) {
	for _, ex := range loadExamples(t) {
		t.Run(ex.name, func(t *testing.T) {
			rec := newRecorder()
			e := start(t, capsule.Options{WrapLedger: rec.wrap})
			run := e.apply(ex.graph, ex.input)
			checkReplay(t, e, rec, *run.RunID)
		})
	}
}

// plannedWorker is a command worker whose k-th run follows line k of its
// plan (ok, fail: exit 1, bad: malformed result, rej: rejected verdict;
// missing lines are ok).
func plannedWorker(t *testing.T, ref, kind string, plan []string) worker.CommandSpec {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "plan"), []byte(strings.Join(plan, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	okOut, rejOut := "cat", "cat"
	if kind == "verifier" {
		okOut, rejOut = `echo '{"signals":{"verdict":"approved"}}'`, `echo '{"signals":{"verdict":"rejected"}}'`
	}
	s := script(t, dir, "w.sh", fmt.Sprintf(`n=$(cat %[1]s/count 2>/dev/null || echo 0)
n=$((n+1)); echo $n > %[1]s/count
o=$(sed -n "${n}p" %[1]s/plan)
case "$o" in
fail) exit 1 ;;
bad) echo '{"unexpected":true}' ;;
rej) %[3]s ;;
*) %[2]s ;;
esac
`, dir, okOut, rejOut))
	if kind == "verifier" {
		return verifierCmd(t, ref, s)
	}
	return stepCmd(t, ref, s)
}

// randomPlan draws up to 6 outcomes, mostly ok.
func randomPlan(r *rand.Rand, kind string) []string {
	choices := []string{"ok", "ok", "ok", "fail", "bad"}
	if kind == "verifier" {
		choices = append(choices, "rej", "rej")
	}
	plan := make([]string, r.IntN(7))
	for i := range plan {
		plan[i] = choices[r.IntN(len(choices))]
	}
	return plan
}

// TestReplayRandomOutcomes runs graphs of command workers whose outcomes
// are drawn at random (every failure is routed by a guard, so each run
// reaches a terminal) and checks the replay property on each.
func TestReplayRandomOutcomes(t *testing.T) {
	type tmpl struct {
		name    string
		workers map[string]string // ref → kind
		graph   func(r *rand.Rand) M
	}
	att := func(r *rand.Rand) opts { return attempts(1 + r.IntN(3)) }
	templates := []tmpl{
		{"seq-choice", map[string]string{"test.w1@1": "step", "test.w2@1": "step"}, func(r *rand.Rand) M {
			return spec(seq("main",
				step("w1", "test.w1@1", att(r), writes(wOut("w1", "text", "text"))),
				choice("afterW1",
					seqP("rest", nil,
						step("w2", "test.w2@1", att(r)),
						choice("afterW2", succeedText("done"), when(onError("w2"), failWith("w2Failed", "w2Failed")))),
					when(onError("w1"), failWith("w1Failed", "w1Failed")))))
		}},
		{"par-loop", map[string]string{"test.w1@1": "step", "test.w2@1": "step", "test.w3@1": "step", "test.v4@1": "verifier"}, func(r *rand.Rand) M {
			joins := []M{{"kind": "all"}, {"kind": "any"}}
			body := seqP("attempt", []opts{promote("text")},
				step("w3", "test.w3@1", att(r), writes(wOut("w3", "text", "text"))),
				verif("v4", "test.v4@1", att(r)))
			return spec(seq("main",
				par("fan", joins[r.IntN(len(joins))], step("w1", "test.w1@1", att(r)), step("w2", "test.w2@1", att(r))),
				loop("repair", body, gIn(ctl("v4", "signal", "verdict"), "approved"), 1+r.IntN(3), promote("text")),
				choice("route", failWith("exhausted", "exhausted"),
					when(onError("w1"), failWith("w1Failed", "w1Failed")),
					when(onError("w2"), failWith("w2Failed", "w2Failed")),
					when(onError("w3"), failWith("w3Failed", "w3Failed")),
					when(onError("v4"), failWith("v4Failed", "v4Failed")),
					when(gIn(ctl("repair", "group", "terminated"), "converged"), succeedText("repaired")))))
		}},
	}
	const cases = 10
	for _, tp := range templates {
		for i := range cases {
			t.Run(fmt.Sprintf("%s-%d", tp.name, i), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(i), uint64(len(tp.name))))
				var cmds []worker.CommandSpec
				var plans []string
				for _, ref := range slices.Sorted(maps.Keys(tp.workers)) {
					plan := randomPlan(r, tp.workers[ref])
					plans = append(plans, ref+"="+strings.Join(plan, ","))
					cmds = append(cmds, plannedWorker(t, ref, tp.workers[ref], plan))
				}
				g := tp.graph(r)
				rec := newRecorder()
				e := start(t, capsule.Options{Commands: cmds, WrapLedger: rec.wrap})
				run, err := e.applyErr(g, hi)
				if err != nil {
					var pe *protocol.Error
					if errors.As(err, &pe) {
						t.Fatalf("apply: %v %s", err, pe.Details)
					}
					t.Fatal(err)
				}
				checkReplay(t, e, rec, *run.RunID)
				t.Logf("plans %v → %s", plans, mustJSON(t, e.get().TerminalResult))
			})
		}
	}
}
