package runs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/internal/testkit"
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

// echoRun is a backend on st, closed with the test, in which alice has
// submitted run "r" of one echo step, and a ledger that holds the run's
// lease (lines are written under it).
func echoRun(t *testing.T, st store.Store) (*runs.Backend, context.Context, *runs.Ledger, engine.RunRef) {
	t.Helper()
	b := runs.New(runs.Config{Store: st, Agents: newFakeAgents(), Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(b.Close)
	ctx := as("alice")
	if _, err := b.Submit(ctx, "r", submission("r", graphOf(step("a", "echo")), "a")); err != nil {
		t.Fatal(err)
	}
	ref := engine.RunRef{Tenant: b.TenantKey("alice"), RunID: "r"}
	l := b.Ledger("test")
	must(t, l.Claim(ctx, ref))
	return b, ctx, l, ref
}

// TestLogLinesOutliveTheStoreBeingDown: lines logged while the store
// cannot write are kept (up to the bound per execution) and written, in
// order, once it can; a read that fails is STORE_UNAVAILABLE, not a
// missing run.
func TestLogLinesOutliveTheStoreBeingDown(t *testing.T) {
	st := &flaky{Store: store.NewMemory(), failed: make(chan struct{}, 2)}
	b, ctx, l, ref := echoRun(t, st)
	st.down.Store(true)
	const logged = 1005 // past the bound of 1,000 lines per execution
	for i := range logged {
		l.Log(ref, "", "info", fmt.Sprintf("line %d", i))
	}
	// A group commit that fails is tried once more, alone; after that its
	// lines are back in the buffer.
	testkit.Recv(t, st.failed)
	testkit.Recv(t, st.failed)
	_, err := b.Status(ctx, "r")
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.DataCode != protocol.StoreUnavailable {
		t.Fatalf("status while the store is down: %v", err)
	}
	st.down.Store(false)
	lines := forcedLogs(t, ctx, b, "r")
	if len(lines) != 1000 {
		t.Fatalf("%d lines written, want the 1000 kept", len(lines))
	}
	for i, l := range lines {
		if m := l["record"].(map[string]any)["message"]; m != fmt.Sprintf("line %d", i) {
			t.Fatalf("line %d is %q", i, m)
		}
	}
}

// readsFail is a store whose reads fail, inside a transaction, with the
// database's own error while down is set (a connection the server ended
// with admin_shutdown, SQLSTATE 57P01), and whose Update and View then
// return that error classified, as the PostgreSQL store does: the
// classification is only on the transaction's answer, not on what its
// reads returned.
type readsFail struct {
	store.Store
	down   atomic.Bool
	failed chan struct{}
}

var errAdminShutdown = errors.New("store/postgres: read run: FATAL: terminating connection due to administrator command (SQLSTATE 57P01)")

type failingTx struct {
	store.Tx
}

func (failingTx) Run(string, string) (store.Run, bool, error) {
	return store.Run{}, false, errAdminShutdown
}
func (failingTx) RunState(string, string) (store.Record, bool, error) {
	return store.Record{}, false, errAdminShutdown
}

func (f *readsFail) Update(ctx context.Context, fn func(store.Tx) error) error {
	if !f.down.Load() {
		return f.Store.Update(ctx, fn)
	}
	err := f.Store.Update(ctx, func(tx store.Tx) error { return fn(failingTx{tx}) })
	if err != nil {
		select {
		case f.failed <- struct{}{}:
		default:
		}
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return nil
}

// TestLogLinesHeldWhenAReadFailsUnavailable: lines whose write failed
// because a read inside its transaction met a database shutting down
// (57P01) are held for the next write, not dropped: the change's answer
// is the store's classified error, not the raw error of the read.
func TestLogLinesHeldWhenAReadFailsUnavailable(t *testing.T) {
	st := &readsFail{Store: store.NewMemory(), failed: make(chan struct{}, 1)}
	b, ctx, l, ref := echoRun(t, st)
	st.down.Store(true)
	l.Log(ref, "", "info", "held line")
	testkit.Recv(t, st.failed)
	st.down.Store(false)
	lines := forcedLogs(t, ctx, b, "r")
	if len(lines) != 1 || lines[0]["record"].(map[string]any)["message"] != "held line" {
		t.Fatalf("logs %v, want the held line", lines)
	}
}
