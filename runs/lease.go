package runs

import (
	"context"
	"time"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/store"
)

// The Ledger is an engine.LeaseKeeper: on a store whose leases expire
// (several replicas on one database) the supervisor renews the native
// runs' claims and releases those it no longer needs — every one when it
// stops (SIGTERM), so that another replica resumes the runs at once
// instead of waiting for the leases to expire. On a local store these do
// nothing.

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
	l.mu.Lock()
	defer l.mu.Unlock()
	var lost []engine.RunRef
	for _, name := range names {
		if ref, ok := l.leased[name]; ok {
			lost = append(lost, ref)
			delete(l.leased, name)
		}
	}
	return lost, nil
}

// Release gives the run's lease up, when the store's leases expire.
func (l *Ledger) Release(ctx context.Context, ref engine.RunRef) error {
	name := store.RunLease(ref.Tenant, ref.RunID)
	l.mu.Lock()
	delete(l.leased, name)
	l.mu.Unlock()
	return l.claims.Release(ctx, name)
}

// claimed remembers which run a claimed lease names, for Renew.
func (l *Ledger) claimed(ref engine.RunRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leased == nil {
		l.leased = map[string]engine.RunRef{}
	}
	l.leased[store.RunLease(ref.Tenant, ref.RunID)] = ref
}
