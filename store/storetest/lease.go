package storetest

import (
	"errors"
	"testing"

	"github.com/oecp/oecp/store"
)

// RunLeases is the conformance suite of the lease port (store.Leaser);
// open returns a fresh, empty store.
func RunLeases(t *testing.T, open func(t *testing.T) store.Store) {
	subtests(t, open, []subtest{
		{"AcquireTakeoverRelease", leased(testLeaseLifecycle)},
		{"FenceInsideUpdate", leased(testLeaseFence)},
		{"ReadableFromView", leased(testLeaseView)},
	})
}

// leased adapts a check of the lease port to a check of a store.
func leased(fn func(t *testing.T, s store.Store, l store.Leaser)) func(t *testing.T, s store.Store) {
	return func(t *testing.T, s store.Store) { fn(t, s, s) }
}

func acquire(t *testing.T, l store.Leaser, name, owner string, want uint64) {
	t.Helper()
	got, err := l.AcquireLease(ctx, name, owner)
	if err != nil || got != want {
		t.Fatalf("AcquireLease(%s, %s) = %d, %v; want epoch %d", name, owner, got, err, want)
	}
}

func checkIn(s store.Store, name string, epoch uint64) error {
	return s.Update(ctx, func(tx store.Tx) error { return store.CheckLease(tx, name, epoch) })
}

func testLeaseLifecycle(t *testing.T, s store.Store, l store.Leaser) {
	name := store.RunLease("t", "r1")
	if err := checkIn(s, name, 1); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("check of a never-acquired lease: %v, want ErrLeaseLost", err)
	}
	acquire(t, l, name, "A", 1)
	acquire(t, l, name, "A", 1) // held: same epoch
	acquire(t, l, store.RunLease("t", "r2"), "A", 1)
	must(t, checkIn(s, name, 1))
	// B is the next process: A is gone, so B takes over with a new epoch.
	acquire(t, l, name, "B", 2)
	if err := checkIn(s, name, 1); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale epoch passed the fence: %v", err)
	}
	must(t, checkIn(s, name, 2))
	if err := l.ReleaseLease(ctx, name, "A", 1); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("release by the old owner: %v", err)
	}
	if err := l.ReleaseLease(ctx, name, "B", 1); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("release at a stale epoch: %v", err)
	}
	must(t, l.ReleaseLease(ctx, name, "B", 2))
	if err := checkIn(s, name, 2); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("released lease passed the fence: %v", err)
	}
	if err := l.ReleaseLease(ctx, name, "B", 2); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("double release: %v", err)
	}
	// Epochs never go back, not even after a release by the same owner.
	acquire(t, l, name, "B", 3)
	if _, err := l.AcquireLease(ctx, name, ""); err == nil {
		t.Fatal("empty owner accepted")
	}
}

func testLeaseFence(t *testing.T, s store.Store, l store.Leaser) {
	name := store.RunLease("t", "r")
	acquire(t, l, name, "A", 1)
	createRun(t, s, "t", "r")
	acquire(t, l, name, "B", 2)
	ch := s.Changed()
	err := s.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.AppendEvent("t", "r", body); err != nil {
			return err
		}
		return store.CheckLease(tx, name, 1) // A, superseded, tries to write
	})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("fenced write: %v", err)
	}
	select {
	case <-ch:
		t.Fatal("a lease change or fenced write woke watchers")
	default:
	}
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		if evs, _ := tx.Events("t", "r", 0, 10); len(evs) != 0 {
			return errors.New("a fenced write was committed")
		}
		return nil
	}))
}

func testLeaseView(t *testing.T, s store.Store, l store.Leaser) {
	acquire(t, l, "x", "A", 1)
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		got, ok, err := tx.Lease("x")
		if err != nil || !ok || got != (store.Lease{Name: "x", Owner: "A", Epoch: 1}) {
			return errors.New("lease row not readable from View")
		}
		if _, ok, _ := tx.Lease("y"); ok {
			return errors.New("unknown lease found")
		}
		return store.CheckLease(tx, "x", 1)
	}))
}
