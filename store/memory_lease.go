package store

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"weak"
)

// The memory store's lease rows live in a side table keyed weakly by the
// store, so that leases could be added without touching memory.go; the
// entry is dropped when the store is garbage collected. The table is
// guarded by the store's own locks: writers hold m.wmu (serialized with
// Update) and m.mu exclusively, readers hold m.mu shared (as every memTx
// does), so a CheckLease inside Update sees no concurrent change.
var memLeaseTables sync.Map // weak.Pointer[memory] -> map[string]Lease

func (m *memory) leases() map[string]Lease {
	k := weak.Make(m)
	if v, ok := memLeaseTables.Load(k); ok {
		return v.(map[string]Lease)
	}
	v, loaded := memLeaseTables.LoadOrStore(k, map[string]Lease{})
	if !loaded {
		runtime.AddCleanup(m, func(k weak.Pointer[memory]) { memLeaseTables.Delete(k) }, k)
	}
	return v.(map[string]Lease)
}

// leaseWrite runs fn on the lease table as one serialized write.
func (m *memory) leaseWrite(ctx context.Context, fn func(map[string]Lease) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return fn(m.leases())
}

func (m *memory) AcquireLease(ctx context.Context, name, owner string) (uint64, error) {
	if owner == "" {
		return 0, fmt.Errorf("store: lease %s: empty owner", name)
	}
	var epoch uint64
	err := m.leaseWrite(ctx, func(ls map[string]Lease) error {
		l := ls[name]
		if l.Owner != owner || l.Epoch == 0 {
			if l.Owner != "" && m.obs != nil {
				m.obs.LeaseTakenOver()
			}
			l = Lease{Name: name, Owner: owner, Epoch: l.Epoch + 1}
			ls[name] = l
		}
		epoch = l.Epoch
		return nil
	})
	return epoch, err
}

func (m *memory) ReleaseLease(ctx context.Context, name, owner string, epoch uint64) error {
	return m.leaseWrite(ctx, func(ls map[string]Lease) error {
		l, ok := ls[name]
		if !ok || l.Owner == "" || l.Owner != owner || l.Epoch != epoch {
			return fmt.Errorf("%w: release %s by %q at epoch %d (now owner %q epoch %d)", ErrLeaseLost, name, owner, epoch, l.Owner, l.Epoch)
		}
		l.Owner = ""
		ls[name] = l
		return nil
	})
}

// Lease reads the committed lease row; the caller holds m.mu shared.
func (t *memTx) Lease(name string) (Lease, bool, error) {
	l, ok := t.m.leases()[name]
	return l, ok, nil
}

var (
	_ Leaser      = (*memory)(nil)
	_ LeaseReader = (*memTx)(nil)
)
