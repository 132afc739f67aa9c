package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Leases record the right to supervise a run. A lease is a row (name,
// owner, epoch) in the store, so the right survives restarts and, later,
// moves between replicas sharing one database.
//
// The owner is an id the supervising process chooses once per process
// lifetime (never reused, not even by a restart with the same pid). The
// local stores (memory, SQLite) serve exactly one live process — the
// SQLite store holds an exclusive lock on its data directory — so a lease
// held under any other owner id belongs to a process that is gone, and
// AcquireLease takes it over at once. A store shared by several live
// processes (PostgreSQL) cannot tell a gone owner from a live one, so its
// leases expire (ExpiringLeaser): an owner renews its leases while it
// lives, and a lease is taken over only once released or expired.
//
// The epoch fences a lease holder that has been superseded: it grows by one
// each time the lease changes hands, and a writer acting under a lease calls
// CheckLease inside the same Update that writes, so its writes commit only
// while it still holds the epoch it acquired.

// ErrLeaseLost: the lease is not held under the given epoch (it was taken
// over, released, or never acquired). The holder must stop acting on it.
var ErrLeaseLost = errors.New("store: lease lost")

// ErrLeaseHeld: AcquireLease found the lease held by another owner whose
// lease has not expired. Only an ExpiringLeaser returns it.
var ErrLeaseHeld = errors.New("store: lease held by another owner")

// Lease is one lease row. Owner is empty when the lease was released.
type Lease struct {
	Name  string
	Owner string
	Epoch uint64
}

// Leaser is the lease port of a Store. Lease changes are not watched
// data: they never close the channels returned by Changed.
type Leaser interface {
	// AcquireLease makes owner the holder of the named lease and returns
	// the epoch it holds it under. A new lease starts at epoch 1. If owner
	// already holds it the epoch is returned unchanged; otherwise (held by
	// an owner that is gone, or released) it is taken over and its epoch
	// bumped.
	AcquireLease(ctx context.Context, name, owner string) (epoch uint64, err error)
	// ReleaseLease gives the lease up if owner holds it under epoch (else
	// ErrLeaseLost). The row and its epoch are kept, so a later holder gets
	// a higher epoch and a stale one can never pass CheckLease again.
	ReleaseLease(ctx context.Context, name, owner string, epoch uint64) error
}

// TxLeaser is a Leaser whose leases can also be acquired inside one of
// its write transactions, so that many acquisitions share one commit.
// AcquireLeaseTx follows AcquireLease's rules; the lease is acquired only
// if tx commits, and (like every lease change) its commit wakes no
// watcher unless tx also wrote watched data.
type TxLeaser interface {
	Leaser
	AcquireLeaseTx(tx Tx, name, owner string) (epoch uint64, err error)
}

// ExpiringLeaser is a Leaser shared by several live processes. A lease
// lasts LeaseTTL from its acquisition or last renewal; AcquireLease takes
// over a lease only when it was released or has expired, and fails with
// ErrLeaseHeld otherwise. Expiry never fences by itself: a holder whose
// lease expired keeps passing CheckLease until another owner takes the
// lease over (bumping the epoch).
type ExpiringLeaser interface {
	Leaser
	// LeaseTTL is how long a lease lasts without renewal.
	LeaseTTL() time.Duration
	// RenewLeases extends every lease owner holds by LeaseTTL and returns
	// them, lease name to epoch. A lease missing from the result is no
	// longer owner's.
	RenewLeases(ctx context.Context, owner string) (map[string]uint64, error)
}

// LeaseReader is the read side of leases, part of every transaction
// (ReadTx and Tx).
type LeaseReader interface {
	// Lease returns the named lease row.
	Lease(name string) (Lease, bool, error)
}

// CheckLease returns nil if the named lease is currently held under epoch,
// and ErrLeaseLost otherwise. Called inside Update, it fences the
// transaction's writes: they commit only if the lease was not taken over.
func CheckLease(tx ReadTx, name string, epoch uint64) error {
	l, ok, err := tx.Lease(name)
	if err != nil {
		return err
	}
	if !ok || l.Owner == "" || l.Epoch != epoch {
		return fmt.Errorf("%w: %s at epoch %d (now owner %q epoch %d)", ErrLeaseLost, name, epoch, l.Owner, l.Epoch)
	}
	return nil
}

// RunLease is the lease name of the right to supervise a run. The tenant is
// quoted so that no pair of tenant and run id collides with another.
func RunLease(tenant, runID string) string {
	return "run:" + strconv.Quote(tenant) + "/" + runID
}
