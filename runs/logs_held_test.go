package runs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
)

// flaky is a store that is down (every read and write fails unavailable,
// as a database that restarts fails them) while down is set; each failed
// write is reported on failed.
type flaky struct {
	store.Store
	down   atomic.Bool
	failed chan struct{}
}

func (f *flaky) Update(ctx context.Context, fn func(store.Tx) error) error {
	if f.down.Load() {
		select {
		case f.failed <- struct{}{}:
		default:
		}
		return fmt.Errorf("%w: terminating connection due to administrator command (SQLSTATE 57P01)", store.ErrUnavailable)
	}
	return f.Store.Update(ctx, fn)
}

func (f *flaky) View(ctx context.Context, fn func(store.ReadTx) error) error {
	if f.down.Load() {
		return fmt.Errorf("%w: terminating connection due to administrator command (SQLSTATE 57P01)", store.ErrUnavailable)
	}
	return f.Store.View(ctx, fn)
}

// TestLogLinesOutliveTheStoreBeingDown: lines logged while the store
// cannot write are kept (up to the bound per execution) and written, in
// order, once it can; a read that fails is STORE_UNAVAILABLE, not a
// missing run.
func TestLogLinesOutliveTheStoreBeingDown(t *testing.T) {
	st := &flaky{Store: store.NewMemory(), failed: make(chan struct{}, 2)}
	b := runs.New(runs.Config{Store: st, Agents: newFakeAgents(), Log: slog.New(slog.DiscardHandler)})
	defer b.Close()
	ctx := as("alice")
	if _, err := b.Submit(ctx, "r", submission("r", graphOf(step("a", "echo")), "a")); err != nil {
		t.Fatal(err)
	}
	ref := engine.RunRef{Tenant: b.TenantKey("alice"), RunID: "r"}
	st.down.Store(true)
	const logged = 1005 // past the bound of 1,000 lines per execution
	l := b.Ledger("test")
	for i := range logged {
		l.Log(ref, "", "info", fmt.Sprintf("line %d", i))
	}
	// A group commit that fails is tried once more, alone; after that its
	// lines are back in the buffer.
	<-st.failed
	<-st.failed
	_, err := b.Status(ctx, "r")
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.DataCode != protocol.StoreUnavailable {
		t.Fatalf("status while the store is down: %v", err)
	}
	st.down.Store(false)
	if _, err := b.Force(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	sub, err := b.Logs(ctx, "r", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines, _ := drain(t, sub)
	if len(lines) != 1000 {
		t.Fatalf("%d lines written, want the 1000 kept", len(lines))
	}
	for i, l := range lines {
		if m := l["record"].(map[string]any)["message"]; m != fmt.Sprintf("line %d", i) {
			t.Fatalf("line %d is %q", i, m)
		}
	}
}
