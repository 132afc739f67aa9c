package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/oecp/oecp/store"
)

// Runs' checkpoint bundles (store.ReadTx.Checkpoint, store.Tx.PutCheckpoint)
// live in the checkpoints table, one row a run; Pruner.DeleteRun deletes
// the row with the run. The statements are not prepared: a checkpoint is
// written once per writer execution and read when a run is taken over.

func (t *txn) Checkpoint(tenant, runID string) ([]byte, bool, error) {
	const q = `SELECT bundle FROM checkpoints WHERE tenant = ? AND run_id = ?`
	var r *sql.Row
	if t.rtx != nil {
		r = t.rtx.QueryRowContext(bg, q, tenant, runID)
	} else {
		r = t.s.wconn.QueryRowContext(bg, q, tenant, runID)
	}
	var b []byte
	err := r.Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, dbErr("read checkpoint", err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, true, nil
}

func (t *txn) PutCheckpoint(tenant, runID string, bundle []byte) error {
	if err := t.writable(); err != nil {
		return err
	}
	r, err := t.run(tenant, runID)
	if err != nil {
		return err
	}
	if r == nil {
		return fmt.Errorf("%w: %q", store.ErrNoRun, runID)
	}
	t.dirty = true
	_, err = t.s.wconn.ExecContext(bg, `INSERT INTO checkpoints (tenant, run_id, bundle) VALUES (?, ?, ?)
		ON CONFLICT (tenant, run_id) DO UPDATE SET bundle = excluded.bundle`, tenant, runID, nonNil(bundle))
	if err != nil {
		return dbErr("write checkpoint", err)
	}
	return nil
}
