package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/store"
)

// The Ledger is an engine.LeaseKeeper: on a store whose leases expire
// (store.ExpiringLeaser, shared by several processes) the supervisor
// renews its run claims and releases those it no longer needs. On a local
// store claims never expire and these do nothing.

var _ engine.LeaseKeeper = (*Ledger)(nil)

// ClaimTTL is the store's lease TTL, or 0 when its leases do not expire.
func (l *Ledger) ClaimTTL() time.Duration {
	if el, ok := l.b.store.(store.ExpiringLeaser); ok {
		return el.LeaseTTL()
	}
	return 0
}

// Renew renews every lease of this process in one store call and returns
// the claimed runs whose lease is no longer held under the claimed epoch.
// Only runs claimed before the renewal started are judged: a claim made
// while it runs is fresh.
func (l *Ledger) Renew(ctx context.Context) ([]engine.RunRef, error) {
	names, err := l.claims.Renew(ctx)
	if err != nil {
		return nil, err
	}
	var lost []engine.RunRef
	for _, name := range names {
		if tenant, runID, ok := store.ParseRunLease(name); ok {
			lost = append(lost, engine.RunRef{Tenant: tenant, RunID: runID})
		}
	}
	return lost, nil
}

// Release gives the run's lease up, when the store's leases expire; a
// lease another process took over is engine.ErrClaimLost.
func (l *Ledger) Release(ctx context.Context, ref engine.RunRef) error {
	err := l.claims.Release(ctx, store.RunLease(ref.Tenant, ref.RunID))
	if errors.Is(err, store.ErrLeaseLost) {
		return fmt.Errorf("%w: %w", engine.ErrClaimLost, err)
	}
	return err
}
