package store

import "fmt"

// Deletions of the memory store are buffered with the transaction (the
// overlay maps of memTx) and applied by commit after its other writes.

type memDeletes struct {
	runs     map[tkey]bool
	idem     map[tkey]bool
	clusters map[string]bool
	leases   map[string]bool
}

func (t *memTx) deleting() *memDeletes {
	if t.deletes == nil {
		t.deletes = &memDeletes{runs: map[tkey]bool{}, idem: map[tkey]bool{}, clusters: map[string]bool{}, leases: map[string]bool{}}
	}
	return t.deletes
}

// deleted reports whether the run is deleted in this transaction: from
// then on the transaction sees no run, event, checkpoint or state of it,
// as the SQL stores' transactions do.
func (t *memTx) deleted(k tkey) bool { return t.deletes != nil && t.deletes.runs[k] }

func (t *memTx) DeleteRun(tenant, runID string) error {
	if err := t.writable(); err != nil {
		return err
	}
	k := tkey{tenant, runID}
	if _, ok := t.run(k); !ok {
		return fmt.Errorf("%w: %q", ErrNoRun, runID)
	}
	t.deleting().runs[k] = true
	return nil
}

func (t *memTx) DeleteIdempotency(tenant, key string) error {
	if err := t.writable(); err != nil {
		return err
	}
	t.deleting().idem[tkey{tenant, key}] = true
	return nil
}

func (t *memTx) DeleteCluster(tenant string) error {
	if err := t.writable(); err != nil {
		return err
	}
	t.deleting().clusters[tenant] = true
	return nil
}

func (t *memTx) DeleteLease(name string) error {
	if err := t.writable(); err != nil {
		return err
	}
	t.deleting().leases[name] = true
	return nil
}

// commitDeletes applies the buffered deletions; the caller holds m.mu
// exclusively, after the transaction's other writes are applied.
func (t *memTx) commitDeletes() {
	d, m := t.deletes, t.m
	if d == nil {
		return
	}
	for k := range d.clusters {
		delete(m.clusters, k)
	}
	if len(d.leases) > 0 {
		ls := m.leases()
		for name := range d.leases {
			delete(ls, name)
		}
	}
	for k := range d.idem {
		delete(m.idem, k)
	}
	for k := range d.runs {
		e, ok := m.runs[k]
		if !ok {
			continue
		}
		for _, ev := range e.events {
			delete(m.bySeq, ev.Seq)
		}
		delete(m.runs, k)
		list := m.tenants[k.tenant]
		for i, x := range list {
			if x == e {
				m.tenants[k.tenant] = append(list[:i:i], list[i+1:]...)
				break
			}
		}
	}
}
