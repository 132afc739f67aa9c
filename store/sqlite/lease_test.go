package sqlite_test

import (
	"context"
	"errors"
	"testing"

	"github.com/oecp/oecp/store"
)

// TestAcquireLeaseTx: leases acquired inside write transactions follow
// AcquireLease's rules (a new lease at epoch 1, the holder's own epoch
// unchanged, a takeover bumps it), are kept only when the transaction
// commits, survive a reopen, and wake no watcher.
func TestAcquireLeaseTx(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, "normal")
	changed := s.Changed()
	acquire := func(names []string, owner string, fail bool) ([]uint64, error) {
		var epochs []uint64
		err := s.Update(ctx, func(tx store.Tx) error {
			epochs = nil
			for _, n := range names {
				e, err := s.AcquireLeaseTx(tx, n, owner)
				if err != nil {
					return err
				}
				epochs = append(epochs, e)
			}
			if fail {
				return errors.New("abandoned")
			}
			return nil
		})
		return epochs, err
	}
	if _, err := acquire([]string{"gone"}, "a", true); err == nil {
		t.Fatal("abandoned transaction succeeded")
	}
	if e, err := acquire([]string{"x", "y", "x"}, "a", false); err != nil || e[0] != 1 || e[1] != 1 || e[2] != 1 {
		t.Fatalf("first acquisition: %v %v", e, err)
	}
	if e, err := acquire([]string{"x"}, "b", false); err != nil || e[0] != 2 {
		t.Fatalf("takeover: %v %v", e, err)
	}
	select {
	case <-changed:
		t.Fatal("lease changes woke a watcher")
	default:
	}
	must(t, s.Close())
	s = open(t, dir, "normal")
	defer s.Close()
	err := s.View(ctx, func(tx store.ReadTx) error {
		if err := store.CheckLease(tx, "x", 2); err != nil {
			return err
		}
		if err := store.CheckLease(tx, "y", 1); err != nil {
			return err
		}
		if err := store.CheckLease(tx, "gone", 1); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("lease of an abandoned transaction: %v", err)
		}
		return nil
	})
	must(t, err)
}
