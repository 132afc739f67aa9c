package cluster

import (
	"context"
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
	el, ok := l.b.store.(store.ExpiringLeaser)
	if !ok {
		return nil, nil
	}
	l.mu.Lock()
	before := make(map[engine.RunRef]uint64, len(l.epochs))
	for ref, epoch := range l.epochs {
		before[ref] = epoch
	}
	l.mu.Unlock()
	held, err := el.RenewLeases(ctx, l.owner)
	if err != nil {
		return nil, err
	}
	var lost []engine.RunRef
	l.mu.Lock()
	defer l.mu.Unlock()
	for ref, epoch := range before {
		if held[store.RunLease(ref.Tenant, ref.RunID)] != epoch {
			lost = append(lost, ref)
			if l.epochs[ref] == epoch {
				delete(l.epochs, ref)
			}
		}
	}
	return lost, nil
}

// Release gives the run's lease up, when the store's leases expire.
func (l *Ledger) Release(ctx context.Context, ref engine.RunRef) error {
	el, ok := l.b.store.(store.ExpiringLeaser)
	if !ok {
		return nil
	}
	l.mu.Lock()
	epoch, claimed := l.epochs[ref]
	delete(l.epochs, ref)
	l.mu.Unlock()
	if !claimed {
		return nil
	}
	return el.ReleaseLease(ctx, store.RunLease(ref.Tenant, ref.RunID), l.owner, epoch)
}
