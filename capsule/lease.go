package capsule

import (
	"context"
	"time"

	"github.com/oecp/oecp/engine"
)

// ledgers keeps the claims of both backends when the store's leases
// expire. Both ledgers claim under one owner id, so renewing the cluster
// ledger's leases renews every lease of this process (one store call);
// the cluster ledger reports the cluster runs it lost, and the native
// runs' writes are fenced by their epochs.
var _ engine.LeaseKeeper = ledgers{}

func (l ledgers) keeper() (engine.LeaseKeeper, bool) {
	k, ok := l.cluster.(engine.LeaseKeeper)
	return k, ok
}

// ClaimTTL is the cluster ledger's (the store's lease TTL).
func (l ledgers) ClaimTTL() time.Duration {
	if k, ok := l.keeper(); ok {
		return k.ClaimTTL()
	}
	return 0
}

// Renew renews every lease of this process.
func (l ledgers) Renew(ctx context.Context) ([]engine.RunRef, error) {
	if k, ok := l.keeper(); ok {
		return k.Renew(ctx)
	}
	return nil, nil
}

// Release releases a run's claim through the ledger that owns the run.
func (l ledgers) Release(ctx context.Context, ref engine.RunRef) error {
	if k, ok := l.of(ref).(engine.LeaseKeeper); ok {
		return k.Release(ctx, ref)
	}
	return nil
}
