package capsule_test

import (
	"context"
	"testing"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/sqlite"
)

// loseSettlements is the ledger of a process that dies before it records
// any outcome: Settle blocks until the engine stops, and the executions
// its shutdown cancelled are never recorded interrupted.
type loseSettlements struct{ engine.Ledger }

func (loseSettlements) Settle(ctx context.Context, _ engine.RunRef, _ []engine.Settlement) error {
	<-ctx.Done()
	return ctx.Err()
}

func (loseSettlements) Interrupt(context.Context, engine.RunRef, []uint64) error { return nil }

// TestCrashRecovery closes a capsule while a builtin.sleep execution
// (attempts 2) is active and starts a new capsule on the same store: the
// orphaned execution ends as crash (node_end and a fault naming it), attempt
// 2 is dispatched and the run finishes succeeded. The first capsule never
// records a settlement, so the execution is orphaned whether or not the
// sleep was still running when it closed.
func TestCrashRecovery(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		mem := store.NewMemory()
		t.Cleanup(func() { _ = mem.Close() })
		shared := noClose{mem}
		crashRecovery(t, func() store.Store { return shared })
	})
	t.Run("sqlite", func(t *testing.T) {
		// A real restart: the first capsule closes its store, the second
		// reopens the data directory.
		dir := t.TempDir()
		crashRecovery(t, func() store.Store {
			st, err := sqlite.Open(context.Background(), sqlite.Options{Dir: dir, Sync: sqlite.SyncNormal})
			if err != nil {
				t.Fatal(err)
			}
			return st
		})
	})
}

func crashRecovery(t *testing.T, open func() store.Store) {
	first := start(t, capsule.Options{Store: open(), WrapLedger: func(l engine.Ledger) engine.Ledger { return loseSettlements{l} }})
	run := first.apply(spec(seq("main", sleepStep("nap", attempts(2)), succeedText("done")), "ms"), `{"text":"hi","ms":100}`)
	first.watchUntil(*run.RunID, "nap begins", func(es events) bool { return len(es.of(protocol.EventNodeBegin, "nap")) == 1 })
	if err := first.c.Close(); err != nil {
		t.Fatal(err)
	}

	second := start(t, capsule.Options{Store: open()})
	wantTerminal(t, second.waitFinished(), "succeeded", hi)
	es := second.history(*run.RunID)
	var got []string
	for _, ev := range es[1:] {
		got = append(got, ev.Event.Type)
	}
	want := []string{"node_begin", "node_end", "fault", "node_begin", "node_end", "finished"}
	if len(got) != len(want) {
		t.Fatalf("events:%s", es)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events:%s", es)
		}
	}
	if o := es[2].outcome(t); es[2].Event.Node.Attempt != 1 || o.Code != "crash" || o.Reason != "declared_failure" {
		t.Fatalf("orphan must end as crash:%s", es)
	}
	if f := es[3].fault(t); f.ExecutionRef != *run.RunID+"/nap/1" || f.Consequence != "turn_failed" || f.Code != "aborted" {
		t.Fatalf("crash fault %+v", f)
	}
	if es[4].Event.Node.Attempt != 2 || es[5].outcome(t).Status != "verified" {
		t.Fatalf("attempt 2 must run and succeed:%s", es)
	}
}
