package store

import (
	"context"
	"fmt"
	"sync"
)

// Claims are the leases one supervising process holds, by lease name, and
// the epochs it holds them under. A process claims a lease once before it
// writes for what the lease guards, then fences each such write with
// Check inside the writing transaction. On a store that keeps no leases
// (not a Leaser) claiming is a no-op and every write passes.
type Claims struct {
	st    Store
	owner string

	mu     sync.Mutex
	epochs map[string]uint64
}

// NewClaims returns the claims of the supervising process owner (an id
// unique to this process lifetime) on st.
func NewClaims(st Store, owner string) *Claims {
	return &Claims{st: st, owner: owner, epochs: map[string]uint64{}}
}

// Claim acquires the named lease (taking it over from an owner that is
// gone) and remembers its epoch.
func (c *Claims) Claim(ctx context.Context, name string) error {
	lr, ok := c.st.(Leaser)
	if !ok {
		return nil
	}
	epoch, err := lr.AcquireLease(ctx, name, c.owner)
	if err == nil {
		c.mu.Lock()
		c.epochs[name] = epoch
		c.mu.Unlock()
	}
	return err
}

// InTx reports whether ClaimTx can acquire leases inside a write
// transaction of the store (a TxLeaser).
func (c *Claims) InTx() bool {
	_, ok := c.st.(TxLeaser)
	return ok
}

// ClaimTx acquires the named lease inside tx, a write transaction of a
// store for which InTx holds. Once tx has committed, Claimed remembers
// the epoch it returned.
func (c *Claims) ClaimTx(tx Tx, name string) (uint64, error) {
	lr, ok := c.st.(TxLeaser)
	if !ok {
		return 0, fmt.Errorf("store: %T cannot acquire leases inside a transaction", c.st)
	}
	return lr.AcquireLeaseTx(tx, name, c.owner)
}

// Claimed remembers the epoch a committed ClaimTx returned.
func (c *Claims) Claimed(name string, epoch uint64) {
	c.mu.Lock()
	c.epochs[name] = epoch
	c.mu.Unlock()
}

// Forget drops a lease this process no longer acts on (its run ended).
func (c *Claims) Forget(name string) {
	c.mu.Lock()
	delete(c.epochs, name)
	c.mu.Unlock()
}

// Check fails with ErrLeaseLost unless, inside tx, this process still
// holds the named lease under the epoch it claimed it with.
func (c *Claims) Check(tx ReadTx, name string) error {
	if _, ok := c.st.(Leaser); !ok {
		return nil
	}
	c.mu.Lock()
	epoch, claimed := c.epochs[name]
	c.mu.Unlock()
	if !claimed {
		return fmt.Errorf("%w: %s was never claimed by %s", ErrLeaseLost, name, c.owner)
	}
	return CheckLease(tx, name, epoch)
}

// Renew extends every lease the owner holds, on a store whose leases
// expire, and returns the names of the claimed leases no longer held
// under their claimed epoch (each is forgotten). Only claims made before
// the renewal started are judged.
func (c *Claims) Renew(ctx context.Context) ([]string, error) {
	el, ok := c.st.(ExpiringLeaser)
	if !ok {
		return nil, nil
	}
	c.mu.Lock()
	before := make(map[string]uint64, len(c.epochs))
	for name, epoch := range c.epochs {
		before[name] = epoch
	}
	c.mu.Unlock()
	held, err := el.RenewLeases(ctx, c.owner)
	if err != nil {
		return nil, err
	}
	var lost []string
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, epoch := range before {
		if held[name] != epoch {
			lost = append(lost, name)
			if c.epochs[name] == epoch {
				delete(c.epochs, name)
			}
		}
	}
	return lost, nil
}

// Release gives up a claimed lease, on a store whose leases expire, so
// that another process takes it over at once; the claim is forgotten.
func (c *Claims) Release(ctx context.Context, name string) error {
	el, ok := c.st.(ExpiringLeaser)
	if !ok {
		return nil
	}
	c.mu.Lock()
	epoch, claimed := c.epochs[name]
	delete(c.epochs, name)
	c.mu.Unlock()
	if !claimed {
		return nil
	}
	return el.ReleaseLease(ctx, name, c.owner, epoch)
}

// Epoch is the epoch this process claimed the named lease under (0: not
// claimed).
func (c *Claims) Epoch(name string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epochs[name]
}
