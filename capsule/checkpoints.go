package capsule

import (
	"context"
	"errors"

	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/tracing"
	"github.com/oecp/oecp/workspace"
	"github.com/oecp/oecp/workspace/checkpoint"
)

// checkpointed is the runs backend's Workspaces of a host that moves
// runs' workspaces between servers through checkpoints.
type checkpointed struct {
	workspaces
	k *checkpoint.Keeper
}

var _ runs.Checkpointer = checkpointed{}

// Checkpoint implements runs.Checkpointer.
func (w checkpointed) Checkpoint(ctx context.Context, tenant, runID string, src runs.Source, execution string) []byte {
	ctx, end := tracing.Work(ctx, tenant, runID, "checkpoint")
	defer end(nil)
	return w.k.Take(ctx, workspace.Key(tenant, runID), source(src), workspace.Branch(tenant, runID), execution).Encode()
}

// Restore implements runs.Checkpointer.
func (w checkpointed) Restore(ctx context.Context, tenant, runID string, src runs.Source, record []byte) error {
	ctx, end := tracing.Work(ctx, tenant, runID, "workspace restore")
	err := w.restore(ctx, tenant, runID, src, record)
	end(err)
	return err
}

func (w checkpointed) restore(ctx context.Context, tenant, runID string, src runs.Source, record []byte) error {
	key := workspace.Key(tenant, runID)
	var cp *checkpoint.Checkpoint
	if record != nil {
		c, err := checkpoint.Decode(record)
		if err != nil {
			return &runs.RestoreError{Why: "its checkpoint is damaged", Err: err}
		}
		cp = &c
	}
	err := w.k.Restore(ctx, key, source(src), workspace.Branch(tenant, runID), cp)
	switch {
	case err == nil, ctx.Err() != nil:
		return err
	case errors.Is(err, checkpoint.ErrSkipped):
		return &runs.RestoreError{Why: "its latest checkpoint was not kept (over the server's size limit, or it could not be made)", Err: err}
	case errors.Is(err, checkpoint.ErrCorrupt):
		return &runs.RestoreError{Why: "its checkpoint is damaged", Err: err}
	case errors.Is(err, checkpoint.ErrRevisionGone):
		return &runs.RestoreError{Why: "the source revision is gone from the repository", Err: err}
	}
	return &runs.RestoreError{Why: "the repository could not be cloned", Err: err}
}
