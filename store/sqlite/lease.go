package sqlite

import (
	"context"
	"fmt"

	"github.com/oecp/oecp/store"
)

// AcquireLease implements store.Leaser. The data directory lock makes this
// process the only live one, so a lease held by any other owner is taken
// over (its owner is gone) and its epoch bumped.
func (s *Store) AcquireLease(ctx context.Context, name, owner string) (uint64, error) {
	if owner == "" {
		return 0, fmt.Errorf("store/sqlite: lease %s: empty owner", name)
	}
	var epoch uint64
	var prev store.Lease
	err := s.write(ctx, func(t *txn) error {
		cur, ok, err := t.Lease(name)
		if err != nil {
			return err
		}
		if ok && cur.Owner == owner {
			epoch = cur.Epoch
			return nil
		}
		prev, epoch = cur, cur.Epoch+1
		if _, err := t.exec(stPutLease, name, owner, int64(epoch)); err != nil {
			return dbErr("acquire lease", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if prev.Owner != "" {
		if s.obs != nil {
			s.obs.LeaseTakenOver()
		}
		s.log.Info("lease taken over", "lease", name, "from", prev.Owner, "owner", owner, "epoch", epoch)
	}
	return epoch, nil
}

// ReleaseLease implements store.Leaser.
func (s *Store) ReleaseLease(ctx context.Context, name, owner string, epoch uint64) error {
	return s.write(ctx, func(t *txn) error {
		cur, ok, err := t.Lease(name)
		if err != nil {
			return err
		}
		if !ok || cur.Owner == "" || cur.Owner != owner || cur.Epoch != epoch {
			return fmt.Errorf("%w: release %s by %q at epoch %d (now owner %q epoch %d)", store.ErrLeaseLost, name, owner, epoch, cur.Owner, cur.Epoch)
		}
		if _, err := t.exec(stPutLease, name, "", int64(epoch)); err != nil {
			return dbErr("release lease", err)
		}
		return nil
	})
}
