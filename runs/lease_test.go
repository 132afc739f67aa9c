package runs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
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
