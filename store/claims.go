package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Claims are the leases one supervising process holds, by lease name, and
// the epochs it holds them under. A process claims a lease once before it
// writes for what the lease guards, then fences each such write with
// Check (or a Fence taken earlier) inside the writing transaction.
//
// A claim lasts until it is released or found lost: a process that stops
// acting on a lease (its run finished) releases it, so that it renews
// only the leases of what it still runs. A release the store could not
// take (it was unavailable) is tried again at every renewal until it is
// taken or the lease is found lost, and until then the lease is judged
// by no renewal: it is not a claim any more.
type Claims struct {
	st    Store
	owner string

	mu     sync.Mutex
	epochs map[string]uint64
	// unreleased are the claims whose release failed, by name, with the
	// epoch to release; Renew releases them first.
	unreleased map[string]uint64
}

// NewClaims returns the claims of the supervising process owner (an id
// unique to this process lifetime) on st.
func NewClaims(st Store, owner string) *Claims {
	return &Claims{st: st, owner: owner, epochs: map[string]uint64{}, unreleased: map[string]uint64{}}
}

// Owner is the owner id the claims are made under.
func (c *Claims) Owner() string { return c.owner }

// Store is the store the claims are made on.
func (c *Claims) Store() Store { return c.st }

// Claim acquires the named lease (taking it over from an owner that is
// gone) and remembers its epoch.
func (c *Claims) Claim(ctx context.Context, name string) error {
	epoch, err := c.st.AcquireLease(ctx, name, c.owner)
	if err == nil {
		c.Claimed(name, epoch)
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
	delete(c.unreleased, name)
	c.mu.Unlock()
}

// Check fails with ErrLeaseLost unless, inside tx, this process still
// holds the named lease under the epoch it claimed it with.
func (c *Claims) Check(tx ReadTx, name string) error {
	return c.Fence(name).Check(tx)
}

// Fence is the named lease as this process holds it now, for a write
// made later on its behalf (a log line written by a flusher): the write
// passes only while the lease is still held under the same epoch.
func (c *Claims) Fence(name string) Fence {
	return FenceOf(name, c.Epoch(name))
}

// Fence fences a write with a lease held under a given epoch. The zero
// Fence fences nothing (a write made on no lease's behalf).
type Fence struct {
	name  string
	epoch uint64
}

// FenceOf is the fence of the named lease held under epoch (0: not held,
// which fails every Check).
func FenceOf(name string, epoch uint64) Fence {
	return Fence{name: name, epoch: epoch}
}

// Check fails with ErrLeaseLost unless, inside tx, the lease is held under
// the fence's epoch.
func (f Fence) Check(tx ReadTx) error {
	if f == (Fence{}) {
		return nil
	}
	if f.epoch == 0 {
		return fmt.Errorf("%w: %s is not claimed", ErrLeaseLost, f.name)
	}
	return CheckLease(tx, f.name, f.epoch)
}

// Renew extends every lease the owner holds, on a store whose leases
// expire, and returns the names of the claimed leases no longer held
// under their claimed epoch (each is forgotten). Only claims made before
// the renewal started, and neither released nor made again by the time
// it ends, are judged. Releases that failed before are tried again first.
func (c *Claims) Renew(ctx context.Context) ([]string, error) {
	el, ok := c.st.(ExpiringLeaser)
	if !ok {
		return nil, nil
	}
	c.retryReleases(ctx, el)
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
		// A claim released meanwhile (its run finished), or released and
		// made again under a new epoch, is not this renewal's to judge:
		// the store's answer may predate that change.
		if held[name] == epoch || c.epochs[name] != epoch {
			continue
		}
		lost = append(lost, name)
		delete(c.epochs, name)
	}
	return lost, nil
}

// retryReleases releases again the claims whose release failed.
func (c *Claims) retryReleases(ctx context.Context, el ExpiringLeaser) {
	c.mu.Lock()
	retry := make(map[string]uint64, len(c.unreleased))
	for name, epoch := range c.unreleased {
		retry[name] = epoch
	}
	c.mu.Unlock()
	for name, epoch := range retry {
		err := el.ReleaseLease(ctx, name, c.owner, epoch)
		if err != nil && !errors.Is(err, ErrLeaseLost) {
			continue // still unavailable: the next renewal tries again
		}
		c.mu.Lock()
		if c.unreleased[name] == epoch {
			delete(c.unreleased, name)
		}
		c.mu.Unlock()
	}
}

// Release gives up a claimed lease, on a store whose leases expire, so
// that another process takes it over at once; the claim is forgotten. A
// release that fails for another reason than the lease being lost is
// tried again by the next Renew.
func (c *Claims) Release(ctx context.Context, name string) error {
	el, ok := c.st.(ExpiringLeaser)
	c.mu.Lock()
	epoch, claimed := c.epochs[name]
	delete(c.epochs, name)
	c.mu.Unlock()
	if !ok || !claimed {
		return nil
	}
	err := el.ReleaseLease(ctx, name, c.owner, epoch)
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		c.mu.Lock()
		if _, again := c.epochs[name]; !again {
			c.unreleased[name] = epoch
		}
		c.mu.Unlock()
	}
	return err
}

// Held reports how many leases are claimed, and how many wait for a
// release to be retried.
func (c *Claims) Held() (claimed, unreleased int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.epochs), len(c.unreleased)
}

// Epoch is the epoch this process claimed the named lease under (0: not
// claimed).
func (c *Claims) Epoch(name string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epochs[name]
}

// ParseRunLease is the tenant and run id a RunLease name was made of; ok
// is false for any other name.
func ParseRunLease(name string) (tenant, runID string, ok bool) {
	rest, ok := strings.CutPrefix(name, "run:")
	if !ok {
		return "", "", false
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil || len(rest) == len(q) || rest[len(q)] != '/' {
		return "", "", false
	}
	tenant, err = strconv.Unquote(q)
	if err != nil {
		return "", "", false
	}
	return tenant, rest[len(q)+1:], true
}
