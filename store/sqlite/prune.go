package sqlite

import (
	"errors"
	"fmt"

	"github.com/oecp/oecp/store"
)

// store.Pruner. Deletions run rarely (retention), so their statements are
// not prepared: each runs on the writer connection inside the write
// transaction.

var _ store.Pruner = (*txn)(nil)

func (t *txn) del(op, query string, args ...any) (int64, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	t.dirty = true
	res, err := t.s.wconn.ExecContext(bg, query, args...)
	if err != nil {
		return 0, dbErr(op, err)
	}
	return res.RowsAffected()
}

func (t *txn) DeleteRun(tenant, runID string) error {
	n, err := t.del("delete run", `DELETE FROM runs WHERE tenant = ? AND id = ?`, tenant, runID)
	if err != nil || n == 0 {
		return errors.Join(err, fmt.Errorf("%w: %q", store.ErrNoRun, runID))
	}
	if _, err := t.del("delete run", `DELETE FROM events WHERE tenant = ? AND run_id = ?`, tenant, runID); err != nil {
		return err
	}
	if _, err := t.del("delete run", `DELETE FROM evidence WHERE tenant = ? AND run_id = ?`, tenant, runID); err != nil {
		return err
	}
	if _, err := t.del("delete run", `DELETE FROM checkpoints WHERE tenant = ? AND run_id = ?`, tenant, runID); err != nil {
		return err
	}
	if _, err := t.exec(stDeleteRunState, tenant, runID); err != nil {
		return dbErr("delete run", err)
	}
	// The deleted events may have held the highest sequence: keep it.
	if _, err := t.exec(stRaiseSeq, int64(t.seq)); err != nil {
		return dbErr("delete run", err)
	}
	delete(t.runs, runKey{tenant, runID})
	return nil
}

func (t *txn) DeleteIdempotency(tenant, key string) error {
	_, err := t.del("delete receipt", `DELETE FROM idempotency WHERE tenant = ? AND key = ?`, tenant, key)
	return err
}

func (t *txn) DeleteLease(name string) error {
	_, err := t.del("delete lease", `DELETE FROM leases WHERE name = ?`, name)
	return err
}

func (t *txn) DeleteCluster(tenant string) error {
	_, err := t.del("delete cluster", `DELETE FROM clusters WHERE tenant = ?`, tenant)
	return err
}
