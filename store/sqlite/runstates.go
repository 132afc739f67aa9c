package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/oecp/oecp/store"
)

// Runs' state records (store.ReadTx.RunState, store.Tx.PutRunState) live
// in the run_states table, one row a run; Pruner.DeleteRun deletes the
// row with the run. A run's state is read and written at every commit of
// the run: the statements are prepared.

func (t *txn) RunState(tenant, runID string) (store.Record, bool, error) {
	var r store.Record
	var v int64
	if ok, err := t.lookup("read run state", stRunState, []any{tenant, runID}, &v, &r.Data); !ok {
		return store.Record{}, false, err
	}
	r.Version, r.Data = uint64(v), nonNil(r.Data)
	return r, true, nil
}

func (t *txn) PutRunState(tenant, runID string, r store.Record) error {
	if err := t.writable(); err != nil {
		return err
	}
	run, err := t.run(tenant, runID)
	if err != nil {
		return err
	}
	if run == nil {
		return fmt.Errorf("%w: %q", store.ErrNoRun, runID)
	}
	data := nonNil(r.Data)
	var res sql.Result
	if r.Version == 1 {
		res, err = t.exec(stInsertRunState, tenant, runID, data)
	} else {
		res, err = t.exec(stUpdateRunState, int64(r.Version), data, tenant, runID, int64(r.Version-1))
	}
	if err != nil {
		return dbErr("write run state", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		cur, _, rerr := t.RunState(tenant, runID)
		return errors.Join(fmt.Errorf("%w: run %q has state version %d, put %d", store.ErrVersionConflict, runID, cur.Version, r.Version), err, rerr)
	}
	return nil
}
