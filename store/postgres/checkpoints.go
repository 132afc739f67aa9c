package postgres

// Runs' checkpoint bundles (store.ReadTx.Checkpoint, store.Tx.PutCheckpoint)
// live in the checkpoints table, one row a run; Pruner.DeleteRun deletes
// the row with the run. A put is queued like every other write; a read
// sends the queued writes first, so it sees the transaction's own put.

const (
	qCheckpoint    = `SELECT bundle FROM checkpoints WHERE tenant = $1 AND run_id = $2`
	qPutCheckpoint = `INSERT INTO checkpoints (tenant, run_id, bundle) VALUES ($1, $2, $3)
		ON CONFLICT (tenant, run_id) DO UPDATE SET bundle = excluded.bundle`
)

func (t *txn) Checkpoint(tenant, runID string) ([]byte, bool, error) {
	var b []byte
	var found bool
	if err := t.send("read checkpoint", row(&found, qCheckpoint, []any{tenant, runID}, &b)); err != nil || !found {
		return nil, false, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, true, nil
}

func (t *txn) PutCheckpoint(tenant, runID string, bundle []byte) error {
	if _, err := t.existingRun(tenant, runID); err != nil {
		return err
	}
	if bundle == nil {
		bundle = []byte{}
	}
	// The queue keeps the slice until the next round trip: copy it, as
	// the caller may reuse it.
	t.queue(qPutCheckpoint, tenant, runID, append([]byte{}, bundle...))
	return nil
}
