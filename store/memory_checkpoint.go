package store

import "fmt"

// A run's checkpoint is kept on its entry, so deleting the run deletes it.
// Bundles put in a transaction wait in memTx.checkpoints until commit.

func (t *memTx) Checkpoint(tenant, runID string) ([]byte, bool, error) {
	k := tkey{tenant, runID}
	if t.deleted(k) {
		return nil, false, nil
	}
	if b, ok := t.checkpoints[k]; ok {
		return b, true, nil
	}
	e, ok := t.m.runs[k]
	if !ok || e.checkpoint == nil {
		return nil, false, nil
	}
	return e.checkpoint, true, nil
}

func (t *memTx) PutCheckpoint(tenant, runID string, bundle []byte) error {
	if err := t.writable(); err != nil {
		return err
	}
	k := tkey{tenant, runID}
	if _, ok := t.run(k); !ok {
		return fmt.Errorf("%w: %q", ErrNoRun, runID)
	}
	if t.checkpoints == nil {
		t.checkpoints = map[tkey][]byte{}
	}
	// Never nil: a nil checkpoint on an entry means none.
	t.checkpoints[k] = append([]byte{}, bundle...)
	return nil
}

// commitCheckpoints applies the bundles put in the transaction; the caller
// holds m.mu exclusively, after the transaction's runs are committed.
func (t *memTx) commitCheckpoints() {
	for k, b := range t.checkpoints {
		if e, ok := t.m.runs[k]; ok {
			e.checkpoint = b
		}
	}
}
