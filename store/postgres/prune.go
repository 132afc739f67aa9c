package postgres

import "github.com/oecp/oecp/store"

// store.Pruner: the deletions are queued like every other write and their
// records marked absent in the transaction's caches.

var _ store.Pruner = (*txn)(nil)

func (t *txn) DeleteRun(tenant, runID string) error {
	r, err := t.existingRun(tenant, runID)
	if err != nil {
		return err
	}
	t.queue(qDropEvents, tenant, runID)
	t.queue(`DELETE FROM runs WHERE tenant = $1 AND id = $2`, tenant, runID)
	// After the run row: an evidence append holding it is waited for.
	t.queue(`DELETE FROM evidence WHERE tenant = $1 AND run_id = $2`, tenant, runID)
	t.queue(`DELETE FROM checkpoints WHERE tenant = $1 AND run_id = $2`, tenant, runID)
	t.queue(qDeleteRunState, tenant, runID)
	t.states = put(t.states, [2]string{tenant, runID}, nil, false)
	r.exists, r.dirty = false, false
	return nil
}

func (t *txn) DeleteIdempotency(tenant, key string) error {
	if err := t.writable(); err != nil {
		return err
	}
	t.queue(`DELETE FROM idempotency WHERE tenant = $1 AND key = $2`, tenant, key)
	if t.receipts == nil {
		t.receipts = map[[2]string]bool{}
	}
	t.receipts[[2]string{tenant, key}] = false
	return nil
}

func (t *txn) DeleteLease(name string) error {
	if err := t.writable(); err != nil {
		return err
	}
	t.queue(`DELETE FROM leases WHERE name = $1`, name)
	return nil
}

func (t *txn) DeleteCluster(tenant string) error {
	if err := t.writable(); err != nil {
		return err
	}
	t.queue(`DELETE FROM clusters WHERE tenant = $1`, tenant)
	t.clusters = put(t.clusters, tenant, nil, false)
	return nil
}
