package cluster_test

import (
	"errors"
	"testing"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// TestLedgerWritesAreFencedByTheRunLease: a supervisor whose run lease was
// taken over (a restarted process claimed the run) can no longer write for
// that run; the new holder can.
func TestLedgerWritesAreFencedByTheRunLease(t *testing.T) {
	st := store.NewMemory()
	b := cluster.New(cluster.Config{Store: st, Engine: true})
	defer b.Close()
	ctx := ctxFor("a")
	res, err := b.Apply(ctx, applyP(graphWith(1000), "k1", nil))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := b.Ledger("old").Running(ctx)
	if err != nil || len(runs) != 1 || runs[0].RunID != *res.RunID {
		t.Fatalf("running %v %v", runs, err)
	}
	ref := runs[0]
	old, fresh := b.Ledger("old"), b.Ledger("new")
	// Writing before claiming is refused.
	if err := old.Finish(ctx, ref, reduce.Terminal{Status: reduce.TerminalFailed, Reason: "x"}); !errors.Is(err, engine.ErrStale) {
		t.Fatalf("unclaimed write: %v", err)
	}
	if err := old.Claim(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Claim(ctx, ref); err != nil { // takeover: epoch bumps
		t.Fatal(err)
	}
	if err := old.Finish(ctx, ref, reduce.Terminal{Status: reduce.TerminalFailed, Reason: "stale"}); !errors.Is(err, engine.ErrStale) {
		t.Fatalf("write under a lost lease: %v", err)
	}
	if err := fresh.Finish(ctx, ref, reduce.Terminal{Status: reduce.TerminalFailed, Reason: "current"}); err != nil {
		t.Fatalf("write under the current lease: %v", err)
	}
	got, err := b.Get(ctx, protocol.GetParams{})
	if err != nil || got.TerminalResult == nil || got.TerminalResult.Reason != "current" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if runs, _ := fresh.Running(ctx); len(runs) != 0 {
		t.Fatalf("finished run still listed as running: %v", runs)
	}
}
