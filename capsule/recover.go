package capsule

import (
	"context"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
)

// ledgers passes the engine's recovery records to the ledger that owns
// the run.

// RecordGroup records an execution's process group.
func (l ledgers) RecordGroup(ctx context.Context, ref engine.RunRef, execution uint64, g worker.Group) error {
	return l.of(ref).RecordGroup(ctx, ref, execution, g)
}

// Interrupt records executions a graceful shutdown cancelled.
func (l ledgers) Interrupt(ctx context.Context, ref engine.RunRef, executions []uint64) error {
	return l.of(ref).Interrupt(ctx, ref, executions)
}

// Unstarted records executions their host could not start.
func (l ledgers) Unstarted(ctx context.Context, ref engine.RunRef, executions []uint64, why string) error {
	return l.of(ref).Unstarted(ctx, ref, executions, why)
}
