package runs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
)

// heldElsewhere is a store whose run leases another live process holds.
type heldElsewhere struct{ store.Store }

func (heldElsewhere) AcquireLease(_ context.Context, name, _ string) (uint64, error) {
	return 0, fmt.Errorf("%w: %s", store.ErrLeaseHeld, name)
}

func (heldElsewhere) AcquireLeaseTx(_ store.Tx, name, _ string) (uint64, error) {
	return 0, fmt.Errorf("%w: %s", store.ErrLeaseHeld, name)
}

func (heldElsewhere) ReleaseLease(context.Context, string, string, uint64) error { return nil }

// TestClaimHeldElsewhereIsTheEngineSentinel: a run another live replica
// supervises is reported as engine.ErrClaimedElsewhere, which the
// supervisor passes over without logging an error on every pass.
func TestClaimHeldElsewhereIsTheEngineSentinel(t *testing.T) {
	b := runs.New(runs.Config{Store: heldElsewhere{store.NewMemory()}, Agents: newFakeAgents(), Log: slog.New(slog.DiscardHandler)})
	defer b.Close()
	err := b.Ledger("me").Claim(context.Background(), engine.RunRef{Tenant: b.TenantKey("alice"), RunID: "r"})
	if !errors.Is(err, engine.ErrClaimedElsewhere) || !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("claim of a run held elsewhere: %v", err)
	}
}

// releases is a native ledger that reports each claim the supervisor
// released, once the release has returned. A claim of a run it released
// waits until resume is closed (or the claim's context ends): a commit of
// the finished run may name it to the change feed only after the pass
// that dropped it, and the supervisor then claims the run again, reads it
// finished and releases it again. Holding that claim keeps it out of what
// the test checks after the first release.
type releases struct {
	*runs.Ledger
	released chan engine.RunRef
	resume   chan struct{}
	mu       sync.Mutex
	gone     map[engine.RunRef]bool // released, under mu
}

func (r *releases) Claim(ctx context.Context, ref engine.RunRef) error {
	r.mu.Lock()
	again := r.gone[ref]
	r.mu.Unlock()
	if again {
		select {
		case <-r.resume:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return r.Ledger.Claim(ctx, ref)
}

func (r *releases) Release(ctx context.Context, ref engine.RunRef) error {
	err := r.Ledger.Release(ctx, ref)
	r.mu.Lock()
	r.gone[ref] = true
	r.mu.Unlock()
	r.released <- ref
	return err
}

// TestFinishedRunReleasesItsLease: on a store whose leases expire
// (PostgreSQL), a run that finished gives its lease up when the
// supervisor drops it: the replica renews no lease afterwards (it had
// renewed every run it ever finished, every TTL/3, forever), and the
// lease row is free for anyone.
func TestFinishedRunReleasesItsLease(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	agents := newFakeAgents()
	b := runs.New(runs.Config{Store: st, Agents: agents, Log: slog.New(slog.DiscardHandler)})
	defer b.Close()
	l := &releases{Ledger: b.Ledger("replica"), released: make(chan engine.RunRef, 16), resume: make(chan struct{}), gone: map[engine.RunRef]bool{}}
	stop := runEngine(t, l)
	defer stop()
	defer close(l.resume) // before stop: a held claim goes on
	ctx := as("alice")
	if _, err := b.Submit(ctx, "done", oneStep("done", "echo")); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, b, ctx, "done")
	if ref := testkit.Recv(t, l.released); ref.RunID != "done" {
		t.Fatalf("released %v", ref)
	}
	held, err := st.RenewLeases(context.Background(), "replica")
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 0 {
		t.Fatalf("the replica still holds (and renews) %v after its run finished", held)
	}
	if _, err := st.AcquireLease(context.Background(), store.RunLease(b.TenantKey("alice"), "done"), "another"); err != nil {
		t.Fatalf("the finished run's lease is not free: %v", err)
	}
}

// TestLostRunLogsNothingMore: a line a replica logs for a run it has lost
// to another replica (it does not know yet) is never written, like its
// results; the new owner's lines are.
func TestLostRunLogsNothingMore(t *testing.T) {
	b := runs.New(runs.Config{Store: store.NewMemory(), Agents: newFakeAgents(), Log: slog.New(slog.DiscardHandler)})
	defer b.Close()
	ctx := as("alice")
	if _, err := b.Submit(ctx, "r", oneStep("r", "echo")); err != nil {
		t.Fatal(err)
	}
	ref := engine.RunRef{Tenant: b.TenantKey("alice"), RunID: "r"}
	stale, owner := b.Ledger("stale"), b.Ledger("owner")
	for _, l := range []*runs.Ledger{stale, owner} {
		if err := l.Claim(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
	}
	stale.Log(ref, "", "error", "execution ended: failed (crash)")
	owner.Log(ref, "", "info", "the owner's line")
	lines := forcedLogs(t, ctx, b, "r")
	var got []string
	for _, l := range lines {
		got = append(got, l["record"].(map[string]any)["message"].(string))
	}
	if len(got) != 1 || got[0] != "the owner's line" {
		t.Fatalf("logs %q, want only the owner's line", got)
	}
}
