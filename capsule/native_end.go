package capsule

import "github.com/oecp/oecp/engine/worker"

// EndRecordPrefix begins the last log record of every native agent or
// delivery execution: its outcome, "succeeded" or "failed (CODE: REASON)",
// follows. Watchers (oecp run watch, the web view) read it to say how an
// execution ended, which the run's status does not carry, also when the run
// as a whole succeeds because its graph does not route the failure.
const EndRecordPrefix = "execution ended: "

// recordEnd logs an execution's outcome as its last record (info for a
// success, warn for a failure).
func recordEnd(sinks worker.Sinks, out worker.Outcome) {
	if sinks.Log == nil {
		return
	}
	if !out.IsError() {
		sinks.Log("info", EndRecordPrefix+"succeeded")
		return
	}
	sinks.Log("warn", EndRecordPrefix+"failed ("+out.Code+": "+out.Reason+")")
}
