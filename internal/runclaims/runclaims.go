// Package runclaims is the one claim/lease implementation behind the
// engine's ledgers of both run kinds (cluster runs and native runs): each
// run is guarded by its supervision lease (store.RunLease), claimed
// through the supervising process's store.Claims, and every write made
// for the run is fenced by the epoch it was claimed under.
//
// A Keeper is an engine.LeaseKeeper: on a store whose leases expire
// (store.ExpiringLeaser, shared by several processes) the supervisor
// renews the claims and releases those it no longer needs — a finished
// run's when the supervisor drops it, and every one when it stops, so
// that another process resumes the runs at once instead of waiting for
// the leases to expire. On a local store claims never expire and renewing
// and releasing do nothing.
package runclaims

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/store"
)

// Keeper is the run claims of one supervising process on one store. Two
// ledgers on the same store may share one Keeper's claims, so that one
// renewal (one store call) renews and judges the claims of both.
type Keeper struct {
	claims *store.Claims
}

var _ engine.LeaseKeeper = (*Keeper)(nil)

// New returns the keeper of the run claims made through claims.
func New(claims *store.Claims) *Keeper {
	return &Keeper{claims: claims}
}

// Claims are the store claims the keeper claims runs through.
func (k *Keeper) Claims() *store.Claims { return k.claims }

// Claim takes the run's supervision lease when the store keeps leases
// (store.Leaser); a lease another live process holds is
// engine.ErrClaimedElsewhere.
func (k *Keeper) Claim(ctx context.Context, ref engine.RunRef) error {
	return ClaimedElsewhere(k.claims.Claim(ctx, Lease(ref)))
}

// ClaimedElsewhere reports a lease another live process holds as the
// engine's sentinel, which the supervisor passes over without a word: the
// run is that process's until its lease is released or expires.
func ClaimedElsewhere(err error) error {
	if errors.Is(err, store.ErrLeaseHeld) {
		return fmt.Errorf("%w: %w", engine.ErrClaimedElsewhere, err)
	}
	return err
}

// Check fails with engine.ErrStale unless, inside tx, this process still
// holds the run's lease under the epoch it claimed it with.
func (k *Keeper) Check(tx store.ReadTx, ref engine.RunRef) error {
	if err := k.claims.Check(tx, Lease(ref)); err != nil {
		return fmt.Errorf("%w: %v", engine.ErrStale, err)
	}
	return nil
}

// Lease is the name of the run's supervision lease.
func Lease(ref engine.RunRef) string { return store.RunLease(ref.Tenant, ref.RunID) }

// ClaimTTL is the store's lease TTL, or 0 when its leases do not expire.
func (k *Keeper) ClaimTTL() time.Duration {
	if el, ok := k.claims.Store().(store.ExpiringLeaser); ok {
		return el.LeaseTTL()
	}
	return 0
}

// Renew renews every lease of this process in one store call and returns
// the claimed runs whose lease is no longer held under the claimed epoch.
// Only runs claimed before the renewal started are judged: a claim made
// while it runs is fresh.
func (k *Keeper) Renew(ctx context.Context) ([]engine.RunRef, error) {
	names, err := k.claims.Renew(ctx)
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
func (k *Keeper) Release(ctx context.Context, ref engine.RunRef) error {
	err := k.claims.Release(ctx, Lease(ref))
	if errors.Is(err, store.ErrLeaseLost) {
		return fmt.Errorf("%w: %w", engine.ErrClaimLost, err)
	}
	return err
}
