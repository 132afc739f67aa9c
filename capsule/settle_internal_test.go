package capsule

import (
	"context"
	"testing"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/reduce"
)

// settleLedger records how settlements reached it; the rest of the
// Ledger is never called.
type settleLedger struct {
	engine.Ledger
	settled, finished int
}

func (l *settleLedger) Settle(context.Context, engine.RunRef, []engine.Settlement) error {
	l.settled++
	return nil
}

// finishingLedger is a ledger that can finish a run in its settlement.
type finishingLedger struct{ settleLedger }

func (l *finishingLedger) SettleFinish(context.Context, engine.RunRef, []engine.Settlement, func(reduce.History) *reduce.Terminal) (bool, error) {
	l.finished++
	return true, nil
}

// The engine's one ledger passes SettleFinish to the native ledger, so a
// native run ends in its last settlement's commit on the server too; a v1
// run's settlements are recorded by Settle and the run is not finished.
func TestLedgersSettleFinishReachesTheNativeLedger(t *testing.T) {
	native, v1 := &finishingLedger{}, &settleLedger{}
	l := ledgers{cluster: v1, native: native}
	done, err := l.SettleFinish(t.Context(), engine.RunRef{Tenant: "n:\"alice\"", RunID: "r"}, nil, nil)
	if err != nil || !done || native.finished != 1 || native.settled != 0 {
		t.Fatalf("native run: finished %v, %v; the native ledger finished %d, settled %d", done, err, native.finished, native.settled)
	}
	done, err = l.SettleFinish(t.Context(), engine.RunRef{Tenant: "alice", RunID: "run-1"}, nil, nil)
	if err != nil || done || v1.settled != 1 {
		t.Fatalf("v1 run: finished %v, %v; the cluster ledger settled %d", done, err, v1.settled)
	}
}
