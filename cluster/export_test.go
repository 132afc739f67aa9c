package cluster

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// Test-only access for the black-box tests of package cluster_test.

// Fault and FaultSource are the BackendFault shape the ledger records.
type (
	Fault       = fault
	FaultSource = faultSource
)

// ErrInvalidFault is the error of a fault that breaks the BackendFault
// shape.
var ErrInvalidFault = errInvalidFault

// EncodeFault validates and encodes f the way the ledger does before it
// records a fault event.
func EncodeFault(f Fault) (json.RawMessage, error) { return f.encode() }

// TenantKey is the store key of a connection tenant's cluster: the Tenant
// of the engine.RunRef the ledger takes.
func (b *Backend) TenantKey(tenant string) string { return b.tenantKey(tenant) }

// HoldCleanup makes the next delete of a finished run hold the deleting
// phase (runtime cleanup pending) until ConfirmCleanup.
func (b *Backend) HoldCleanup(ctx context.Context, tenant string) error {
	return b.updateState(ctx, b.tenantKey(tenant), func(_ store.Tx, st *state) error {
		st.CleanupHeld = true
		return nil
	})
}

// ConfirmCleanup confirms runtime cleanup: a cluster held in deleting is
// finalized to empty (its runs tombstoned); otherwise later deletes no
// longer hold.
func (b *Backend) ConfirmCleanup(ctx context.Context, tenant string) error {
	key := b.tenantKey(tenant)
	return b.updateState(ctx, key, func(tx store.Tx, st *state) error {
		st.CleanupHeld = false
		if st.Phase == protocol.PhaseDeleting {
			return finalizeDelete(tx, key, st)
		}
		return nil
	})
}

// FailTurn stands in for the hook of the reference testkit the
// lifecycle-controls golden depends on: it appends the dispatch record of
// turn and its retryable failure (a bookmark each) to the tenant's running
// run and leaves turn as the retry frontier.
func (b *Backend) FailTurn(ctx context.Context, tenant, turn string) error {
	key := b.tenantKey(tenant)
	return b.updateState(ctx, key, func(tx store.Tx, st *state) error {
		if st.Phase != protocol.PhaseRunning {
			return errors.New("cluster: FailTurn needs a running run")
		}
		for range 2 {
			if err := appendRecord(tx, key, st, bookmarkEvent); err != nil {
				return err
			}
		}
		st.Frontier = turn
		return nil
	})
}

// StartExecution registers an active execution of tenant without
// publishing anything, so that a test can attach before the ledger's
// ExecutionStarted publishes its working event.
func (b *Backend) StartExecution(tenant, execution string) {
	b.startExecution(b.tenantKey(tenant), execution)
}

// SetFeedWindow sets how many events a run's feed keeps and reads at
// once; call it before the first watch.
func (b *Backend) SetFeedWindow(n int) { b.feedWindow = n }

// HoldWatchRole marks the only feed as watched, as a watcher woken by a
// commit leaves it until it is back under the feed's lock; release makes
// that watcher leave the role as the feed's code does.
func (b *Backend) HoldWatchRole() (release func()) {
	b.feeds.mu.Lock()
	var f *runFeed
	for _, x := range b.feeds.m {
		f = x
	}
	b.feeds.mu.Unlock()
	f.mu.Lock()
	f.watching = true
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		_ = f.leaveWatch(context.Background(), nil)
	}
}

// EndedKey names the ended-run index; UpgradedKey the record that says
// it was moved out of the earlier layout.
const (
	EndedKey    = endedKey
	UpgradedKey = upgradedKey
)
