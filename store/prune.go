package store

// Pruner is the deletion port of a Store's write transactions (part of
// Tx), used by retention to delete the history of runs long finished.
//
// Deletion never reuses a sequence: LastSeq does not move back when the
// events holding it are deleted. A record deleted in a transaction must
// not be read again in that transaction (what such a read sees is not
// specified); the transaction's other reads and writes behave as usual.
type Pruner interface {
	// DeleteRun deletes a run record, every event of it and its
	// checkpoint (and evidence). Afterwards the run, its events and its
	// checkpoint are not found (Run, Event, Events, FirstRunAfter,
	// Checkpoint), as if they had never been written, and the run id may
	// be created again. An unknown run is ErrNoRun.
	DeleteRun(tenant, runID string) error
	// DeleteIdempotency deletes a receipt; an absent one is no error.
	DeleteIdempotency(tenant, key string) error
	// DeleteCluster deletes a cluster record; an absent one is no error. A
	// later PutCluster of the key starts again at version 1.
	DeleteCluster(tenant string) error
	// DeleteLease deletes a lease row (store.Leaser) whose run is gone;
	// an absent one is no error. A later AcquireLease starts it again at
	// epoch 1, so it must not be deleted while anyone may still hold it.
	DeleteLease(name string) error
}
