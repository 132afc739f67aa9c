package runs

import (
	"context"
	"io"

	"github.com/oecp/oecp/tracing"
)

// traceSubmitted notes a run's admission by the request in ctx: its root
// span starts now and links to that request's span.
func traceSubmitted(ctx context.Context, tk, runID string) { tracing.RunCreated(ctx, tk, runID) }

// traceForced emits the root span of a run force-stopped by this call
// (the engine finishes every other run).
func traceForced(tk, runID string) {
	tracing.RunFinished(tk, runID, "failed", reasonForceStopped)
}

// exportTraceID is the run's trace id for its export's header ("" while
// tracing is off), given to a writer that takes it (an HTTP export sends
// it as a header).
func exportTraceID(w io.Writer, tk, runID string) string {
	id := tracing.RunTraceIDString(tk, runID)
	if tw, ok := w.(interface{ SetTraceID(string) }); ok {
		tw.SetTraceID(id)
	}
	return id
}
