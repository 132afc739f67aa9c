package engine

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/tracing"
)

// The engine's spans: one per execution, under its run's root span (the
// run's trace is derived from the run, so an execution another replica
// runs joins it), and the root span itself when this supervisor finishes
// the run. Free while tracing is off.

// traceExecution starts the span of one execution: "<step|verifier>
// <node>", with the node, the execution's ref and attempt and the worker's
// bounded label.
func traceExecution(ctx context.Context, ref RunRef, d Dispatch, node graph.Node, worker string) (context.Context, tracing.Span) {
	if !tracing.Enabled() {
		return ctx, nil
	}
	tracing.RunSeen(ref.Tenant, ref.RunID)
	kind := "execution"
	switch node.(type) {
	case *graph.Step:
		kind = "step"
	case *graph.Verifier:
		kind = "verifier"
	}
	return tracing.Start(tracing.RunContext(ctx, ref.Tenant, ref.RunID), kind+" "+d.Occurrence.Node, trace.WithAttributes(
		tracing.KeyRunID.String(ref.RunID), tracing.KeyNode.String(d.Occurrence.Node), tracing.KeyNodeKind.String(kind),
		tracing.KeyExecution.String(d.Ref), tracing.KeyAttempt.Int(int(d.Attempt)), tracing.KeyWorker.String(worker)))
}

// endExecution ends an execution's span with its outcome: a failure
// carries error.type = the outcome code ("cancelled" when it was voided
// or interrupted).
func endExecution(ctx, wctx context.Context, span tracing.Span, o result) {
	if span == nil {
		return
	}
	label := outcomeLabel(o.Outcome)
	if (ctx.Err() != nil && o.IsError()) || (wctx.Err() != nil && ctx.Err() == nil && !o.timedOut) {
		label = "cancelled"
	}
	span.SetAttributes(tracing.KeyOutcome.String(label))
	if label != "ok" {
		code := o.Code
		if label == "cancelled" || code == "" {
			code = label
		}
		span.SetAttributes(attribute.String("oecp.outcome.reason", o.Reason))
		tracing.Fail(span, code, "execution ended "+code)
	}
	span.End()
}

// traceFinished emits a finished run's root span.
func traceFinished(ref RunRef, t reduce.Terminal) {
	tracing.RunFinished(ref.Tenant, ref.RunID, string(t.Status), t.Reason)
}
