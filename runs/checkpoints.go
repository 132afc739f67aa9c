package runs

import (
	"context"
	"errors"
	"sync"

	"github.com/oecp/oecp/store"
)

// Checkpointer is implemented by Workspaces that can move a run's
// workspace to another server. After each writer execution (an agent
// step, a delivery) the backend takes a checkpoint and keeps it in the
// ledger with the execution's settlement, in one transaction; a server
// that supervises a run whose executions started before (elsewhere, or
// here before a restart) rebuilds its workspace from the source revision
// and the latest checkpoint before anything is dispatched.
type Checkpointer interface {
	// Checkpoint records the run's workspace after execution (its ref)
	// and returns the record to keep, opaque to the backend. It never
	// fails: a checkpoint that could not be made is a record that says
	// so, after which the workspace cannot be rebuilt elsewhere.
	Checkpoint(ctx context.Context, tenant, runID string, src Source, execution string) []byte
	// Restore makes the run's workspace src's revision plus the record
	// (src alone when it is nil). An error leaves no workspace behind and
	// is a *RestoreError.
	Restore(ctx context.Context, tenant, runID string, src Source, record []byte) error
}

// RestoreError is a workspace that could not be rebuilt: Why is the
// sentence the run's log gives the tenant (no URL, path or git output);
// Err the details for the server's log.
type RestoreError struct {
	Why string
	Err error
}

func (e *RestoreError) Error() string { return e.Why + ": " + e.Err.Error() }
func (e *RestoreError) Unwrap() error { return e.Err }

// checkpointExec names one execution of a run.
type checkpointExec struct {
	run runKey
	id  uint64
}

// checkpoints holds the checkpoints taken after executions that have not
// been settled yet: each is written with its execution's settlement.
type checkpoints struct {
	mu sync.Mutex
	m  map[checkpointExec][]byte
}

func (c *checkpoints) put(k checkpointExec, rec []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[checkpointExec][]byte{}
	}
	c.m[k] = rec
}

func (c *checkpoints) get(k checkpointExec) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// drop forgets the checkpoints of executions whose settlement was written
// or refused.
func (c *checkpoints) drop(run runKey, ids []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.m, checkpointExec{run, id})
	}
}

// takeCheckpoint records the workspace after a writer execution, for its
// settlement to keep.
func (b *Backend) takeCheckpoint(ctx context.Context, k runKey, id uint64, src Source, execution string) {
	cp, ok := b.cfg.Workspaces.(Checkpointer)
	if !ok {
		return
	}
	b.cps.put(checkpointExec{k, id}, cp.Checkpoint(ctx, k.tk, k.runID, src, execution))
}

// saveCheckpoint writes the checkpoint taken after execution id, if any,
// as the run's latest (the store's checkpoint of the run, which retention
// deletes with the run), inside its settlement's transaction.
func (b *Backend) saveCheckpoint(tx store.Tx, k runKey, id uint64) error {
	rec := b.cps.get(checkpointExec{k, id})
	if rec == nil {
		return nil
	}
	return tx.PutCheckpoint(k.tk, k.runID, rec)
}

// latestCheckpoint reads the run's latest checkpoint (nil: none yet).
func (b *Backend) latestCheckpoint(ctx context.Context, k runKey) ([]byte, error) {
	var rec []byte
	err := b.store.View(ctx, func(tx store.ReadTx) error {
		var err error
		rec, _, err = tx.Checkpoint(k.tk, k.runID)
		return err
	})
	return rec, err
}

// restoreWorkspace rebuilds the workspace of a run whose executions
// started before this process supervised it.
func (b *Backend) restoreWorkspace(ctx context.Context, cp Checkpointer, k runKey, src Source) error {
	rec, err := b.latestCheckpoint(ctx, k)
	if err != nil {
		return &RestoreError{Why: "its checkpoint could not be read from the store", Err: err}
	}
	err = cp.Restore(ctx, k.tk, k.runID, src, rec)
	var re *RestoreError
	if err != nil && !errors.As(err, &re) {
		err = &RestoreError{Why: "it could not be rebuilt", Err: err}
	}
	return err
}
