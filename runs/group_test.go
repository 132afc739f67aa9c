package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/sqlite"
)

// TestManyConcurrentRunsOnSQLiteSurviveReopen: many one-step runs
// submitted at once on SQLite (their writes share group commits), with
// every execution running at once and under the default bound of 16,
// each finish with exactly their own records — admitted, started,
// completed with their own agent's outcome (a crash for the failing ones,
// the echo for the others), terminal — each run's terminal recorded by
// its settlement (the engine never needs a finish write of its own), and
// after the store is closed and opened again every acknowledged record is
// there, unchanged.
func TestManyConcurrentRunsOnSQLiteSurviveReopen(t *testing.T) {
	t.Run("unbounded", func(t *testing.T) { manyRunsSurviveReopen(t, 120, 0) })
	n := 1000
	if testing.Short() {
		n = 200
	}
	t.Run("bound 16", func(t *testing.T) { manyRunsSurviveReopen(t, n, 16) })
}

// finishes counts the ledger's own finish writes.
type finishes struct {
	*runs.Ledger
	n atomic.Int64
}

func (f *finishes) Finish(ctx context.Context, ref engine.RunRef, t reduce.Terminal) error {
	f.n.Add(1)
	return f.Ledger.Finish(ctx, ref, t)
}

func manyRunsSurviveReopen(t *testing.T, n, bound int) {
	dir := t.TempDir()
	open := func() *sqlite.Store {
		st, err := sqlite.Open(context.Background(), sqlite.Options{Dir: dir, Sync: sqlite.SyncNormal})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	agents := newFakeAgents()
	b := runs.New(runs.Config{Store: st, Agents: agents, Log: slog.New(slog.DiscardHandler)})
	ledger := &finishes{Ledger: b.Ledger("first")}
	sup := engine.New(ledger, worker.NewRegistry(), slog.New(slog.DiscardHandler))
	sup.SetMaxActive(bound)
	stop := runSupervisor(t, sup)
	ctx := as("alice")
	want := map[string]string{}
	for i := range n {
		want[fmt.Sprintf("many-%03d", i)] = map[bool]string{true: "fail", false: "echo"}[i%3 == 0]
	}
	var wg sync.WaitGroup
	for id, instr := range want {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Submit(ctx, id, oneStep(id, instr)); err != nil {
				t.Error(id, err)
				return
			}
			sub, err := b.Watch(ctx, id, nil)
			if err != nil {
				t.Error(id, err)
				return
			}
			defer sub.Stream.Close()
			evs, closed := drain(t, sub)
			if closed != "done" {
				t.Errorf("%s: watch closed %q", id, closed)
			}
			for _, ev := range evs {
				if x, ok := ev["execution"].(string); ok && !strings.HasPrefix(x, id+"/") {
					t.Errorf("%s: record of execution %s", id, x)
				}
			}
		}()
	}
	testkit.Wait(t, &wg)
	stop()
	b.Close()
	if k := ledger.n.Load(); k != 0 {
		t.Errorf("%d runs finished by a write of their own, not by their settlement", k)
	}
	before := records(t, st, b.TenantKey("alice"), want)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open()
	defer st.Close()
	after := records(t, st, b.TenantKey("alice"), want)
	for id := range want {
		if before[id] != after[id] {
			t.Errorf("%s: %s before the reopen, %s after", id, before[id], after[id])
		}
	}
}

// records checks every run's records — its own execution, settled with
// its own agent's outcome, then its terminal — and returns them.
func records(t *testing.T, st store.Store, tk string, want map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := st.View(context.Background(), func(tx store.ReadTx) error {
		for id, instr := range want {
			evs, err := tx.Events(tk, id, 0, 100)
			if err != nil {
				return err
			}
			var kinds []string
			for _, ev := range evs {
				var rec struct {
					Kind, Execution string
					Detail          json.RawMessage
				}
				if err := json.Unmarshal(ev.Body, &rec); err != nil {
					return err
				}
				kinds = append(kinds, rec.Kind)
				if rec.Execution != "" && rec.Execution != id+"/work/1" {
					t.Errorf("%s: record of execution %s", id, rec.Execution)
				}
				outcome := map[string]string{"fail": `"code":"crash"`, "echo": `"status":"verified"`}[instr]
				if rec.Kind == "node_completed" && !strings.Contains(string(rec.Detail), outcome) {
					t.Errorf("%s (%s): completed with %s", id, instr, rec.Detail)
				}
				out[id] += string(ev.Body) + "\n"
			}
			if got := strings.Join(kinds, " "); got != "run_admitted node_started node_completed terminal" {
				t.Errorf("%s: records %s", id, got)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
