package runs

import (
	"context"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

// RunUnary serves run/submit, run/list, run/status, run/force and
// run/harnesses.
func (b *Backend) RunUnary(ctx context.Context, method string, p protocol.RunParams) (any, error) {
	switch method {
	case protocol.MethodRunSubmit:
		return b.Submit(ctx, p.RunID, p.Submission)
	case protocol.MethodRunList:
		return b.List(ctx)
	case protocol.MethodRunStatus:
		return b.Status(ctx, p.RunID)
	case protocol.MethodRunForce:
		return b.Force(ctx, p.RunID)
	case protocol.MethodRunHarnesses:
		return b.Harnesses(ctx)
	}
	return nil, protocol.Unsupported(server.RunMethodNoun(method))
}

// RunSubscribe serves run/watch, run/logs and run/attach.
func (b *Backend) RunSubscribe(ctx context.Context, method string, p protocol.RunParams) (*server.Subscription, error) {
	switch method {
	case protocol.MethodRunWatch:
		return b.Watch(ctx, p.RunID, p.FromCursor)
	case protocol.MethodRunLogs:
		return b.Logs(ctx, p.RunID, p.FromCursor, p.Execution)
	case protocol.MethodRunAttach:
		if p.Execution != nil {
			return b.Attach(ctx, p.RunID, *p.Execution)
		}
	}
	return nil, protocol.Unsupported(server.RunMethodNoun(method))
}
