package runs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/store"
)

// The Ledger is an engine.LeaseKeeper: on a store whose leases expire
// (several replicas on one database) the supervisor renews the native
// runs' claims and releases those it no longer needs — a finished run's
// when the supervisor drops it, and every one when it stops (SIGTERM), so
// that another replica resumes the runs at once instead of waiting for
// the leases to expire. On a local store these do nothing.

var _ engine.LeaseKeeper = (*Ledger)(nil)

// ClaimTTL is the store's lease TTL, or 0 when its leases do not expire.
func (l *Ledger) ClaimTTL() time.Duration {
	if el, ok := l.b.store.(store.ExpiringLeaser); ok {
		return el.LeaseTTL()
	}
	return 0
}

// Renew renews every lease of this process and returns the claimed runs
// whose lease is no longer held under the claimed epoch.
func (l *Ledger) Renew(ctx context.Context) ([]engine.RunRef, error) {
	names, err := l.claims.Renew(ctx)
	if err != nil {
		return nil, err
	}
	return RunsOfLeases(names), nil
}

// RunsOfLeases are the runs the run lease names name (other names are
// skipped).
func RunsOfLeases(names []string) []engine.RunRef {
	var refs []engine.RunRef
	for _, name := range names {
		if tk, runID, ok := store.ParseRunLease(name); ok {
			refs = append(refs, engine.RunRef{Tenant: tk, RunID: runID})
		}
	}
	return refs
}

// Release gives the run's lease up, when the store's leases expire; a
// lease another process took over is engine.ErrClaimLost.
func (l *Ledger) Release(ctx context.Context, ref engine.RunRef) error {
	return ClaimLost(l.claims.Release(ctx, store.RunLease(ref.Tenant, ref.RunID)))
}

// ClaimLost reports a release that found the lease taken over as
// engine.ErrClaimLost.
func ClaimLost(err error) error {
	if errors.Is(err, store.ErrLeaseLost) {
		return fmt.Errorf("%w: %w", engine.ErrClaimLost, err)
	}
	return err
}
