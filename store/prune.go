package store

// Pruner is the deletion port of a Store's write transactions (part of
// Tx), used by retention to delete the history of runs long finished.
//
// Deletion never reuses a sequence: LastSeq does not move back when the
// events holding it are deleted. A run deleted in a transaction is gone
// for the rest of it (below); what another record deleted in a
// transaction reads as later in that transaction is not specified. The
// transaction's other reads and writes behave as usual.
type Pruner interface {
	// DeleteRun deletes a run record, every event of it, its state, its
	// checkpoint (and evidence). From then on, in this transaction and
	// after it, the run, its events, state and checkpoint are not found
	// (Run, Event, Events, FirstRunAfter, RunState, Checkpoint), as if
	// they had never been written, and writes to it are ErrNoRun. The run
	// id may be created again in a later transaction (the memory store
	// refuses it in the same one). An unknown run is ErrNoRun.
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
