package capsule

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
)

// TestRenewalReportsLostNativeRuns: a replica whose claims were taken
// over while it was stopped (its leases expired, another replica took
// them) learns it at its next renewal for its native runs as well as its
// v1 runs: the renewal asked only the v1 ledger which claims were lost,
// so the supervisor kept the native run and took the new owner's
// executions for orphans.
func TestRenewalReportsLostNativeRuns(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, postgres.Options{DSN: dsn, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.DiscardHandler)
	cb := cluster.New(cluster.Config{Store: st, Verifier: Verifier(nil), Engine: true, Log: log})
	rb := runs.New(runs.Config{Store: st, Log: log})
	defer rb.Close()
	l := newLedgers(st, cb, rb, "stale")
	native := engine.RunRef{Tenant: rb.TenantKey("alice"), RunID: "native"}
	v1 := engine.RunRef{Tenant: "t:alice", RunID: "v1"}
	kept := engine.RunRef{Tenant: rb.TenantKey("bob"), RunID: "kept"}
	for _, ref := range []engine.RunRef{native, v1, kept} {
		if err := l.Claim(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	// The stale replica's leases of two runs expire and another replica
	// takes them over.
	pgtest.Exec(t, "UPDATE "+pgx.Identifier{schema, "leases"}.Sanitize()+" SET expires = now() - interval '1 second' WHERE name = ANY($1)",
		[][]byte{[]byte(store.RunLease(native.Tenant, native.RunID)), []byte(store.RunLease(v1.Tenant, v1.RunID))})
	for _, ref := range []engine.RunRef{native, v1} {
		if _, err := st.AcquireLease(ctx, store.RunLease(ref.Tenant, ref.RunID), "new-owner"); err != nil {
			t.Fatal(err)
		}
	}
	lost, err := l.Renew(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(lost, func(a, b engine.RunRef) int { return strings.Compare(a.RunID, b.RunID) })
	if !slices.Equal(lost, []engine.RunRef{native, v1}) {
		t.Fatalf("renewal reported lost %v, want %v and %v", lost, native, v1)
	}
}
