package capsule

import (
	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/internal/runclaims"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
)

// ledgers keeps the claims of both backends when the store's leases
// expire. Both ledgers claim through one store.Claims (one owner id), and
// ledgers keeps them through one runclaims.Keeper over those claims, so
// one renewal (one store call) renews every lease of this process and
// judges every claim: a lost v1 run and a lost native run alike are
// reported to the supervisor, which stops their workers and writes
// nothing more for them.

// newLedgers is the engine's ledger over both backends on st, claiming
// for the supervising process owner.
func newLedgers(st store.Store, cb *cluster.Backend, rb *runs.Backend, owner string) ledgers {
	claims := store.NewClaims(st, owner)
	return ledgers{cluster: cb.LedgerOf(claims), native: rb.LedgerOf(claims), Keeper: runclaims.New(claims)}
}
