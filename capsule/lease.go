package capsule

import (
	"context"
	"time"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
)

// ledgers keeps the claims of both backends when the store's leases
// expire. Both ledgers claim through one store.Claims (one owner id), so
// one renewal (one store call) renews every lease of this process and
// judges every claim: a lost v1 run and a lost native run alike are
// reported to the supervisor, which stops their workers and writes
// nothing more for them.
var _ engine.LeaseKeeper = ledgers{}

// newLedgers is the engine's ledger over both backends on st, claiming
// for the supervising process owner.
func newLedgers(st store.Store, cb *cluster.Backend, rb *runs.Backend, owner string) ledgers {
	claims := store.NewClaims(st, owner)
	return ledgers{cluster: cb.LedgerOf(claims), native: rb.LedgerOf(claims), claims: claims}
}

// ClaimTTL is the store's lease TTL (0: leases do not expire).
func (l ledgers) ClaimTTL() time.Duration {
	if k, ok := l.cluster.(engine.LeaseKeeper); ok {
		return k.ClaimTTL()
	}
	return 0
}

// Renew renews every lease of this process and returns the runs, of
// either backend, whose claim it lost.
func (l ledgers) Renew(ctx context.Context) ([]engine.RunRef, error) {
	if l.claims == nil {
		return nil, nil
	}
	names, err := l.claims.Renew(ctx)
	if err != nil {
		return nil, err
	}
	return runs.RunsOfLeases(names), nil
}

// Release releases a run's claim through the ledger that owns the run.
func (l ledgers) Release(ctx context.Context, ref engine.RunRef) error {
	if k, ok := l.of(ref).(engine.LeaseKeeper); ok {
		return k.Release(ctx, ref)
	}
	return nil
}
