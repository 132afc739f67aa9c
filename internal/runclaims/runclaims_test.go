package runclaims_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/internal/runclaims"
	"github.com/oecp/oecp/store"
)

// expiring is a memory store whose leases expire (an ExpiringLeaser):
// RenewLeases answers the leases not marked lost, and a lease marked
// elsewhere is held by another live process.
type expiring struct {
	store.Store
	mu        sync.Mutex
	lost      map[string]bool
	elsewhere map[string]bool
}

func newExpiring() *expiring {
	return &expiring{Store: store.NewMemory(), lost: map[string]bool{}, elsewhere: map[string]bool{}}
}

func (e *expiring) AcquireLease(ctx context.Context, name, owner string) (uint64, error) {
	e.mu.Lock()
	elsewhere := e.elsewhere[name]
	e.mu.Unlock()
	if elsewhere {
		return 0, fmt.Errorf("%w: %s", store.ErrLeaseHeld, name)
	}
	return e.Store.AcquireLease(ctx, name, owner)
}

func (e *expiring) ReleaseLease(ctx context.Context, name, owner string, epoch uint64) error {
	return e.Store.ReleaseLease(ctx, name, owner, epoch)
}

func (e *expiring) LeaseTTL() time.Duration { return time.Minute }

func (e *expiring) RenewLeases(ctx context.Context, owner string) (map[string]uint64, error) {
	held := map[string]uint64{}
	err := e.View(ctx, func(tx store.ReadTx) error {
		for _, name := range []string{"other", runclaims.Lease(refA), runclaims.Lease(refB)} {
			l, ok, err := tx.Lease(name)
			if err != nil {
				return err
			}
			e.mu.Lock()
			lost := e.lost[name]
			e.mu.Unlock()
			if ok && l.Owner == owner && !lost {
				held[name] = l.Epoch
			}
		}
		return nil
	})
	return held, err
}

var (
	refA = engine.RunRef{Tenant: "t:a", RunID: "r1"}
	refB = engine.RunRef{Tenant: "t:b", RunID: "r2"}
)

func TestRenewReportsOnlyTheLostRuns(t *testing.T) {
	ctx := context.Background()
	st := newExpiring()
	claims := store.NewClaims(st, "me")
	k := runclaims.New(claims)
	if got := k.ClaimTTL(); got != time.Minute {
		t.Fatalf("ClaimTTL = %v, want the store's lease TTL", got)
	}
	for _, ref := range []engine.RunRef{refA, refB} {
		if err := k.Claim(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	if err := claims.Claim(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	st.lost[runclaims.Lease(refB)], st.lost["other"] = true, true
	lost, err := k.Renew(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lost, []engine.RunRef{refB}) {
		t.Fatalf("Renew lost %v, want only %v (a lease that names no run is not a run)", lost, refB)
	}
}

func TestClaimHeldElsewhereAndReleaseTakenOver(t *testing.T) {
	ctx := context.Background()
	st := newExpiring()
	st.elsewhere[runclaims.Lease(refA)] = true
	k := runclaims.New(store.NewClaims(st, "me"))
	if err := k.Claim(ctx, refA); !errors.Is(err, engine.ErrClaimedElsewhere) {
		t.Fatalf("Claim of a lease held elsewhere = %v, want engine.ErrClaimedElsewhere", err)
	}
	if err := k.Claim(ctx, refB); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AcquireLease(ctx, runclaims.Lease(refB), "another"); err != nil {
		t.Fatal(err)
	}
	err := st.View(ctx, func(tx store.ReadTx) error { return k.Check(tx, refB) })
	if !errors.Is(err, engine.ErrStale) {
		t.Fatalf("Check after a takeover = %v, want engine.ErrStale", err)
	}
	if err := k.Release(ctx, refB); !errors.Is(err, engine.ErrClaimLost) {
		t.Fatalf("Release after a takeover = %v, want engine.ErrClaimLost", err)
	}
}

func TestLocalStoreClaimsNeverExpire(t *testing.T) {
	ctx := context.Background()
	k := runclaims.New(store.NewClaims(store.NewMemory(), "me"))
	if err := k.Claim(ctx, refA); err != nil {
		t.Fatal(err)
	}
	if ttl := k.ClaimTTL(); ttl != 0 {
		t.Fatalf("ClaimTTL on a local store = %v, want 0", ttl)
	}
	if lost, err := k.Renew(ctx); err != nil || lost != nil {
		t.Fatalf("Renew on a local store = %v, %v; want nothing", lost, err)
	}
	if err := k.Release(ctx, refA); err != nil {
		t.Fatalf("Release on a local store = %v", err)
	}
}
