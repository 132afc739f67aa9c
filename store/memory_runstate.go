package store

import "fmt"

// A run's state record is kept on its entry, so deleting the run deletes
// it. Records put in a transaction wait in memTx.states until commit.

func (t *memTx) RunState(tenant, runID string) (Record, bool, error) {
	k := tkey{tenant, runID}
	if t.deleted(k) {
		return Record{}, false, nil
	}
	if r, ok := t.states[k]; ok {
		return r, true, nil
	}
	e, ok := t.m.runs[k]
	if !ok || e.state.Version == 0 {
		return Record{}, false, nil
	}
	return e.state, true, nil
}

func (t *memTx) PutRunState(tenant, runID string, r Record) error {
	if err := t.writable(); err != nil {
		return err
	}
	k := tkey{tenant, runID}
	if _, ok := t.run(k); !ok {
		return fmt.Errorf("%w: %q", ErrNoRun, runID)
	}
	cur, _, _ := t.RunState(tenant, runID)
	if r.Version != cur.Version+1 {
		return fmt.Errorf("%w: run %q has state version %d, put %d", ErrVersionConflict, runID, cur.Version, r.Version)
	}
	if t.states == nil {
		t.states = map[tkey]Record{}
	}
	t.states[k] = Record{Version: r.Version, Data: append([]byte{}, r.Data...)}
	return nil
}

// commitStates applies the records put in the transaction; the caller
// holds m.mu exclusively, after the transaction's runs are committed.
func (t *memTx) commitStates() {
	for k, r := range t.states {
		if e, ok := t.m.runs[k]; ok {
			e.state = r
		}
	}
}
