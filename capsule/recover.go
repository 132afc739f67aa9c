package capsule

import (
	"context"
	"errors"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
)

// ledgers passes the engine's recovery records to the ledger that owns
// the run, when that ledger keeps them; a ledger without them leaves its
// runs' executions to be settled as crash after any restart.
var _ engine.Recovery = ledgers{}

// RecordGroup records an execution's process group.
func (l ledgers) RecordGroup(ctx context.Context, ref engine.RunRef, execution uint64, g worker.Group) error {
	if r, ok := l.of(ref).(engine.Recovery); ok {
		return r.RecordGroup(ctx, ref, execution, g)
	}
	return nil
}

// Interrupt records executions a graceful shutdown cancelled.
func (l ledgers) Interrupt(ctx context.Context, ref engine.RunRef, executions []uint64) error {
	if r, ok := l.of(ref).(engine.Recovery); ok {
		return r.Interrupt(ctx, ref, executions)
	}
	return nil
}

var _ engine.HostFaults = ledgers{}

// Unstarted records executions their host could not start, when the
// run's ledger can; otherwise the supervisor settles them as they ended.
func (l ledgers) Unstarted(ctx context.Context, ref engine.RunRef, executions []uint64, why string) error {
	if h, ok := l.of(ref).(engine.HostFaults); ok {
		return h.Unstarted(ctx, ref, executions, why)
	}
	return errors.New("capsule: the run's ledger does not record unstarted executions")
}
