package cluster

import (
	"context"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/tracing"
)

// traceApplied notes the run a committed apply started (or named again:
// a run already noted keeps its note), linked from its root span to the
// apply's span in ctx.
func traceApplied(ctx context.Context, tenant string, p protocol.ApplyParams, res *protocol.ApplyResult) {
	if p.DryRun || res == nil || res.Deduped || res.RunID == nil {
		return
	}
	tracing.RunCreated(ctx, tenant, *res.RunID)
}
