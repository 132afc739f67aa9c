package postgres

import (
	"fmt"

	"github.com/oecp/oecp/store"
)

// Runs' state records (store.ReadTx.RunState, store.Tx.PutRunState) live
// in the run_states table, one row a run; Pruner.DeleteRun deletes the
// row with the run. A write transaction caches each record it read or
// wrote (a run's state is read, then written, at every commit of the run)
// and queues its writes; the version guard holds as PutCluster's does.

const (
	qRunState       = `SELECT version, data FROM run_states WHERE tenant = $1 AND run_id = $2`
	qInsertRunState = `INSERT INTO run_states (tenant, run_id, version, data) VALUES ($1, $2, 1, $3)`
	qUpdateRunState = `UPDATE run_states SET version = $1, data = $2 WHERE tenant = $3 AND run_id = $4 AND version = $5`
	qDeleteRunState = `DELETE FROM run_states WHERE tenant = $1 AND run_id = $2`
)

func (t *txn) RunState(tenant, runID string) (store.Record, bool, error) {
	k := [2]string{tenant, runID}
	if r, ok := t.states[k]; ok {
		if r == nil {
			return store.Record{}, false, nil
		}
		return *r, true, nil
	}
	var r store.Record
	var found bool
	if err := t.send("read run state", row(&found, qRunState, []any{tenant, runID}, &r.Version, &r.Data)); err != nil {
		return store.Record{}, false, err
	}
	if t.write {
		t.states = put(t.states, k, &r, found)
	}
	return r, found, nil
}

func (t *txn) PutRunState(tenant, runID string, r store.Record) error {
	if _, err := t.existingRun(tenant, runID); err != nil {
		return err
	}
	cur, found, err := t.RunState(tenant, runID)
	if err != nil {
		return err
	}
	if r.Version != cur.Version+1 {
		return fmt.Errorf("%w: run %q has state version %d, put %d", store.ErrVersionConflict, runID, cur.Version, r.Version)
	}
	// The queue keeps the slice until the next round trip, and the cache
	// longer: copy it, as the caller may reuse it.
	r.Data = append([]byte{}, r.Data...)
	if found {
		t.queue(qUpdateRunState, r.Version, r.Data, tenant, runID, cur.Version)
	} else {
		t.queue(qInsertRunState, tenant, runID, r.Data)
	}
	t.states[[2]string{tenant, runID}] = &r
	return nil
}
