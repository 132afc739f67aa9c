package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/store"
)

// expiring is a memory store whose leases "expire" (an ExpiringLeaser):
// RenewLeases returns the leases the owner holds. While down is set, a
// release fails with the store unavailable.
type expiring struct {
	store.Store
	mu   sync.Mutex
	held map[string]uint64 // lease -> epoch, of the one owner
	down bool
	// renewing, when set, runs as RenewLeases begins, before it reads
	// what the owner holds.
	renewing func()
}

func newExpiring() *expiring { return &expiring{Store: store.NewMemory(), held: map[string]uint64{}} }

func (e *expiring) AcquireLease(ctx context.Context, name, owner string) (uint64, error) {
	epoch, err := e.Store.AcquireLease(ctx, name, owner)
	if err == nil {
		e.mu.Lock()
		e.held[name] = epoch
		e.mu.Unlock()
	}
	return epoch, err
}

func (e *expiring) ReleaseLease(ctx context.Context, name, owner string, epoch uint64) error {
	e.mu.Lock()
	down := e.down
	e.mu.Unlock()
	if down {
		return fmt.Errorf("%w: connection refused", store.ErrUnavailable)
	}
	err := e.Store.ReleaseLease(ctx, name, owner, epoch)
	if err == nil {
		e.mu.Lock()
		delete(e.held, name)
		e.mu.Unlock()
	}
	return err
}

func (e *expiring) LeaseTTL() time.Duration { return time.Minute }

func (e *expiring) RenewLeases(context.Context, string) (map[string]uint64, error) {
	if e.renewing != nil {
		e.renewing()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]uint64{}
	for k, v := range e.held {
		out[k] = v
	}
	return out, nil
}

// TestClaimsReleaseRetriedAtRenewal: a release the store could not take
// (it was unavailable) is not forgotten: the claim is no longer judged,
// and the next renewal releases the lease, so a finished run never keeps
// a lease renewed for the life of the process.
func TestClaimsReleaseRetriedAtRenewal(t *testing.T) {
	ctx := context.Background()
	st := newExpiring()
	c := store.NewClaims(st, "me")
	name := store.RunLease("t", "r")
	if err := c.Claim(ctx, name); err != nil {
		t.Fatal(err)
	}
	st.down = true
	if err := c.Release(ctx, name); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("release while down: %v", err)
	}
	if claimed, unreleased := c.Held(); claimed != 0 || unreleased != 1 {
		t.Fatalf("after a failed release: %d claimed, %d unreleased; want 0 and 1", claimed, unreleased)
	}
	st.down = false
	lost, err := c.Renew(ctx)
	if err != nil || len(lost) != 0 {
		t.Fatalf("renewal: lost %v, %v", lost, err)
	}
	if claimed, unreleased := c.Held(); claimed != 0 || unreleased != 0 {
		t.Fatalf("after the renewal: %d claimed, %d unreleased; want none", claimed, unreleased)
	}
	if held, _ := st.RenewLeases(ctx, "me"); len(held) != 0 {
		t.Fatalf("the owner still holds %v", held)
	}
}

// TestRenewJudgesOnlyClaimsItSaw: a claim released while a renewal runs
// (its run finished) is not reported lost, nor is one released and
// claimed again meanwhile under a new epoch, which stays claimed; a claim
// the store no longer holds for the owner still is. A release racing
// the renewal once made a single server log that it lost the claim of
// the run it had just finished.
func TestRenewJudgesOnlyClaimsItSaw(t *testing.T) {
	ctx := context.Background()
	st := newExpiring()
	c := store.NewClaims(st, "me")
	finished, again, taken := store.RunLease("t", "finished"), store.RunLease("t", "again"), store.RunLease("t", "taken")
	for _, name := range []string{finished, again, taken} {
		if err := c.Claim(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	first := c.Epoch(again)
	st.renewing = func() {
		st.renewing = nil
		if err := c.Release(ctx, finished); err != nil {
			t.Error(err)
		}
		if err := c.Release(ctx, again); err != nil {
			t.Error(err)
		}
		if err := c.Claim(ctx, again); err != nil {
			t.Error(err)
		}
		st.mu.Lock()
		delete(st.held, taken) // another owner took it over
		st.mu.Unlock()
	}
	lost, err := c.Renew(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != 1 || lost[0] != taken {
		t.Fatalf("renewal reported %q lost, want only %q", lost, taken)
	}
	if e := c.Epoch(again); e == 0 || e == first {
		t.Fatalf("the claim made again during the renewal has epoch %d (first %d), want a new one kept", e, first)
	}
	if c.Epoch(taken) != 0 {
		t.Fatal("the lost claim is still remembered")
	}
}

// TestFenceOfALostClaimFails: a fence taken while the lease was held
// fails once another owner took it over; a fence taken with no claim
// fails on a store that keeps leases, and the zero fence passes.
func TestFenceOfALostClaimFails(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	c := store.NewClaims(st, "me")
	name := store.RunLease("t", "r")
	unclaimed := c.Fence(name)
	if err := c.Claim(ctx, name); err != nil {
		t.Fatal(err)
	}
	f := c.Fence(name)
	check := func(f store.Fence) error {
		return st.Update(ctx, func(tx store.Tx) error { return f.Check(tx) })
	}
	if err := check(f); err != nil {
		t.Fatalf("fence of a held lease: %v", err)
	}
	if _, err := st.AcquireLease(ctx, name, "other"); err != nil {
		t.Fatal(err)
	}
	for what, f := range map[string]store.Fence{"lost": f, "unclaimed": unclaimed} {
		if err := check(f); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("fence of a %s lease: %v, want ErrLeaseLost", what, err)
		}
	}
	if err := check(store.Fence{}); err != nil {
		t.Fatalf("zero fence: %v", err)
	}
}

// TestParseRunLease: a run lease name gives back its tenant and run id,
// whatever the tenant holds.
func TestParseRunLease(t *testing.T) {
	for _, c := range [][2]string{{"t", "r"}, {`n:"alice/bob"`, "run/x"}, {"", "r"}, {"\x00odd\"", ""}} {
		tenant, runID, ok := store.ParseRunLease(store.RunLease(c[0], c[1]))
		if !ok || tenant != c[0] || runID != c[1] {
			t.Errorf("ParseRunLease(RunLease(%q, %q)) = %q, %q, %v", c[0], c[1], tenant, runID, ok)
		}
	}
	for _, bad := range []string{"", "run:", "run:t/r", `run:"t"`, `lease:"t"/r`} {
		if _, _, ok := store.ParseRunLease(bad); ok {
			t.Errorf("ParseRunLease(%q) ok", bad)
		}
	}
}
