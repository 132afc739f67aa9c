package sqlite

import (
	"context"
	"fmt"

	"github.com/oecp/oecp/store"
)

var _ store.TxLeaser = (*Store)(nil)

// takeover is a lease a write transaction took over from another owner,
// reported once the transaction has committed.
type takeover struct {
	name, from, owner string
	epoch             uint64
}

// AcquireLease implements store.Leaser. The data directory lock makes this
// process the only live one, so a lease held by any other owner is taken
// over (its owner is gone) and its epoch bumped.
func (s *Store) AcquireLease(ctx context.Context, name, owner string) (uint64, error) {
	var epoch uint64
	var taken []takeover
	err := s.write(ctx, func(t *txn) error {
		var err error
		epoch, err = t.acquireLease(name, owner)
		taken = t.takeovers
		return err
	})
	if err != nil {
		return 0, err
	}
	s.reportTakeovers(taken)
	return epoch, nil
}

// AcquireLeaseTx implements store.TxLeaser: AcquireLease inside tx, one of
// this store's write transactions.
func (s *Store) AcquireLeaseTx(tx store.Tx, name, owner string) (uint64, error) {
	t, ok := tx.(*txn)
	if !ok || t.s != s || t.rtx != nil {
		return 0, fmt.Errorf("store/sqlite: lease %s: %T is not a write transaction of this store", name, tx)
	}
	return t.acquireLease(name, owner)
}

// acquireLease makes owner the holder of the named lease in this write
// transaction and returns its epoch; a takeover is kept for reporting.
func (t *txn) acquireLease(name, owner string) (uint64, error) {
	if owner == "" {
		return 0, fmt.Errorf("store/sqlite: lease %s: empty owner", name)
	}
	cur, ok, err := t.Lease(name)
	if err != nil {
		return 0, err
	}
	if ok && cur.Owner == owner {
		return cur.Epoch, nil
	}
	epoch := cur.Epoch + 1
	// A lease row is not watched data: it marks the transaction leased,
	// not dirty, so that its commit wakes no watcher.
	t.leased = true
	if _, err := t.s.wstmts[stPutLease].ExecContext(bg, name, owner, int64(epoch)); err != nil {
		return 0, dbErr("acquire lease", err)
	}
	if cur.Owner != "" {
		t.takeovers = append(t.takeovers, takeover{name: name, from: cur.Owner, owner: owner, epoch: epoch})
	}
	return epoch, nil
}

// reportTakeovers logs and counts the takeovers of a committed
// transaction.
func (s *Store) reportTakeovers(taken []takeover) {
	for _, tk := range taken {
		if s.obs != nil {
			s.obs.LeaseTakenOver()
		}
		s.log.Info("lease taken over", "lease", tk.name, "from", tk.from, "owner", tk.owner, "epoch", tk.epoch)
	}
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
