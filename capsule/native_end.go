package capsule

import (
	"context"
	"errors"

	"github.com/oecp/oecp/engine/worker"
)

// EndRecordPrefix begins the last log record of every native agent or
// delivery execution: its outcome, "succeeded", "failed (CODE: REASON)" or
// "cancelled (…)", follows. Watchers (oecp run watch, the web view) read it to say how an
// execution ended, which the run's status does not carry, also when the run
// as a whole succeeds because its graph does not route the failure.
const EndRecordPrefix = "execution ended: "

// endCancelled is the outcome of an execution whose context was cancelled:
// the engine discards what it returned (a force stop ends it as a refusal,
// a server shutdown runs the node again), so it is neither a success nor a
// failure of its own.
const endCancelled = "cancelled (a force stop, or a server shutdown after which the node runs again)"

// recordEnd logs an execution's outcome as its last record (info for a
// success or a cancellation, warn for a failure, a timeout included).
func recordEnd(ctx context.Context, sinks worker.Sinks, out worker.Outcome) {
	if sinks.Log == nil {
		return
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		sinks.Log("info", EndRecordPrefix+endCancelled)
		return
	}
	if !out.IsError() {
		sinks.Log("info", EndRecordPrefix+"succeeded")
		return
	}
	sinks.Log("warn", EndRecordPrefix+"failed ("+out.Code+": "+out.Reason+")")
}
