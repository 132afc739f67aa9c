package runs_test

import (
	"encoding/json"
	"testing"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/runs"
)

// TestSettleFinishDecidesOnlyWhenNothingRuns: a settlement asks for the
// run's terminal only once no execution of the run is left active; no
// terminal leaves the run running, and a terminal finishes it in the
// settlement's own transaction, its terminal record right after the
// completion.
func TestSettleFinishDecidesOnlyWhenNothingRuns(t *testing.T) {
	b := runs.New(runs.Config{Agents: newFakeAgents()})
	defer b.Close()
	ctx := as("alice")
	if _, err := b.Submit(ctx, "r", oneStep("r", "echo")); err != nil {
		t.Fatal(err)
	}
	l := b.Ledger("me")
	ref := engine.RunRef{Tenant: b.TenantKey("alice"), RunID: "r"}
	if err := l.Claim(ctx, ref); err != nil {
		t.Fatal(err)
	}
	var ds []engine.Dispatch
	for x := range uint64(2) {
		ds = append(ds, engine.Dispatch{Ref: "r/work/" + string(rune('1'+x)), Dispatch: reduce.Dispatch{NodeInstance: x + 1, Execution: x + 1,
			Occurrence: reduce.Occurrence{Node: "work"}, Input: json.RawMessage("null")}})
	}
	if err := l.Dispatch(ctx, ref, ds); err != nil {
		t.Fatal(err)
	}
	ok := []engine.Settlement{{Execution: 1, Outcome: worker.Outcome{Status: "verified", Output: json.RawMessage("null")}}}
	finished, err := l.SettleFinish(ctx, ref, ok, func(reduce.History) *reduce.Terminal {
		t.Error("decide called with an execution still active")
		return nil
	})
	if err != nil || finished {
		t.Fatalf("first settlement: finished %v, %v", finished, err)
	}
	ok[0].Execution = 2
	finished, err = l.SettleFinish(ctx, ref, ok, func(h reduce.History) *reduce.Terminal {
		if len(h.Executions) != 2 || h.Executions[1].State != reduce.StateSettled {
			t.Errorf("decide saw %+v", h.Executions)
		}
		return nil
	})
	if st, _ := b.Status(ctx, "r"); err != nil || finished || st.Status.Phase != runs.PhaseRunning {
		t.Fatalf("no terminal: finished %v, %v, phase %+v", finished, err, st)
	}

	if _, err := b.Submit(ctx, "s", oneStep("s", "echo")); err != nil {
		t.Fatal(err)
	}
	ref.RunID = "s"
	ds[0].Ref = "s/work/1"
	if err := l.Claim(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := l.Dispatch(ctx, ref, ds[:1]); err != nil {
		t.Fatal(err)
	}
	ok[0].Execution = 1
	finished, err = l.SettleFinish(ctx, ref, ok, func(reduce.History) *reduce.Terminal {
		return &reduce.Terminal{Status: reduce.TerminalSucceeded, Output: json.RawMessage("null")}
	})
	if err != nil || !finished {
		t.Fatalf("terminal: finished %v, %v", finished, err)
	}
	sub, err := b.Watch(ctx, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stream.Close()
	evs, closed := drain(t, sub)
	var phases []any
	for _, ev := range evs {
		phases = append(phases, ev["status"].(map[string]any)["phase"])
	}
	// admitted, started, completed (still running), terminal (finished)
	if closed != "done" || len(phases) != 4 || phases[2] != runs.PhaseRunning || phases[3] != runs.PhaseFinished {
		t.Fatalf("records with phases %v, closed %q", phases, closed)
	}
}
