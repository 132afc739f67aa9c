package server

import (
	"context"

	"github.com/oecp/oecp/protocol"
)

// Backend is what a cluster implementation provides to the dispatcher. The
// connection identity travels in ctx (identity.From). Every method may
// return a *protocol.Error to choose the wire error; any other error is
// answered as -32603 INTERNAL_ERROR and logged. Cancelling ctx means the
// caller no longer wants the answer; committed effects stay committed.
//
// Results are encoded with protocol.Marshal, so they must be the
// protocol result types (or other types declared in wire key order).
type Backend interface {
	// Initialize is called after the dispatcher has checked the version.
	Initialize(ctx context.Context) (*protocol.InitializeResult, error)
	Get(ctx context.Context, p protocol.GetParams) (*protocol.GetResult, error)
	Plan(ctx context.Context, p protocol.PlanParams) (*protocol.PlanResult, error)
	Apply(ctx context.Context, p protocol.ApplyParams) (*protocol.ApplyResult, error)
	Update(ctx context.Context, p protocol.UpdateParams) (*protocol.UpdateResult, error)
	Stop(ctx context.Context, p protocol.StopParams) (*protocol.StopResult, error)
	Retry(ctx context.Context, p protocol.RetryParams) (*protocol.RetryResult, error)
	Resubmit(ctx context.Context, p protocol.ResubmitParams) (*protocol.ResubmitResult, error)
	Delete(ctx context.Context, p protocol.DeleteParams) (*protocol.DeleteResult, error)
	Watch(ctx context.Context, p protocol.WatchParams) (*Subscription, error)
	Logs(ctx context.Context, p protocol.LogsParams) (*Subscription, error)
	AgentAttach(ctx context.Context, p protocol.AgentAttachParams) (*Subscription, error)
	// RunUnary serves run/submit, run/list, run/status and run/force.
	RunUnary(ctx context.Context, method string, p protocol.RunParams) (any, error)
	// RunSubscribe serves run/watch, run/logs and run/attach.
	RunSubscribe(ctx context.Context, method string, p protocol.RunParams) (*Subscription, error)
}

// Subscription is an established subscription handed to the connection
// core. The backend mints ID; it must be unique among the connection's live
// subscriptions (a duplicate is answered as an internal error and the
// stream is closed, never silently overwritten).
type Subscription struct {
	ID string
	// Result is the establishment result (encoded with protocol.Marshal).
	Result any
	// Stream yields the subscription's notifications.
	Stream Stream
	// MaxEventBytes bounds one encoded event's params (0: no bound). An
	// event over it ends the subscription silently, with no frame.
	MaxEventBytes int
	// TrackCursor adds lastDeliveredCursor to a SLOW_CONSUMER close.
	TrackCursor bool
}

// Notification is one item of a Stream.
type Notification struct {
	// Rest holds the event params' members after subscriptionId, each
	// preceded by a comma (`,"runId":"run-1",...`), so one encoding can be
	// shared by every subscriber of the same event.
	Rest []byte
	// Cursor is the event's cursor, if it has one.
	Cursor string
	// Closed, when non-empty, is the reason of a terminal
	// subscription/closed ("SLOW_CONSUMER" or "done"); Rest is ignored.
	Closed string
}

// Stream is a subscription's source of notifications.
type Stream interface {
	// Next blocks for the next notification. It returns an error when the
	// stream has ended (silently) or ctx is done.
	Next(ctx context.Context) (Notification, error)
	// Close releases the stream; it is called exactly once.
	Close()
}

// Unsupported answers every optional method the way the reference's
// default backend does. Embed it and override what you serve.
type Unsupported struct{}

// Plan is not served.
func (Unsupported) Plan(context.Context, protocol.PlanParams) (*protocol.PlanResult, error) {
	return nil, protocol.AppError(protocol.InvalidPhase, "Backend does not admit graphs", nil)
}

// Apply is not served.
func (Unsupported) Apply(context.Context, protocol.ApplyParams) (*protocol.ApplyResult, error) {
	return nil, protocol.AppError(protocol.InvalidPhase, "Backend does not admit graphs", nil)
}

// Update is not served.
func (Unsupported) Update(context.Context, protocol.UpdateParams) (*protocol.UpdateResult, error) {
	return nil, protocol.Unsupported("lifecycle updates")
}

// Stop is not served.
func (Unsupported) Stop(context.Context, protocol.StopParams) (*protocol.StopResult, error) {
	return nil, protocol.Unsupported("lifecycle stop")
}

// Retry is not served.
func (Unsupported) Retry(context.Context, protocol.RetryParams) (*protocol.RetryResult, error) {
	return nil, protocol.Unsupported("lifecycle retry")
}

// Resubmit is not served.
func (Unsupported) Resubmit(context.Context, protocol.ResubmitParams) (*protocol.ResubmitResult, error) {
	return nil, protocol.Unsupported("lifecycle resubmit")
}

// Delete is not served.
func (Unsupported) Delete(context.Context, protocol.DeleteParams) (*protocol.DeleteResult, error) {
	return nil, protocol.Unsupported("lifecycle delete")
}

// Watch is not served.
func (Unsupported) Watch(context.Context, protocol.WatchParams) (*Subscription, error) {
	return nil, protocol.Unsupported("watch")
}

// Logs is not served.
func (Unsupported) Logs(context.Context, protocol.LogsParams) (*Subscription, error) {
	return nil, protocol.Unsupported("logs")
}

// AgentAttach is not served.
func (Unsupported) AgentAttach(context.Context, protocol.AgentAttachParams) (*Subscription, error) {
	return nil, protocol.Unsupported("agent attach")
}

// RunUnary is not served.
func (Unsupported) RunUnary(_ context.Context, method string, _ protocol.RunParams) (any, error) {
	return nil, protocol.Unsupported(RunMethodNoun(method))
}

// RunSubscribe is not served.
func (Unsupported) RunSubscribe(_ context.Context, method string, _ protocol.RunParams) (*Subscription, error) {
	return nil, protocol.Unsupported(RunMethodNoun(method))
}

// RunMethodNoun is the "Backend does not support …" noun of a run method.
func RunMethodNoun(method string) string {
	switch method {
	case protocol.MethodRunSubmit:
		return "native-v2 submission"
	case protocol.MethodRunList:
		return "native-v2 run inventory"
	case protocol.MethodRunStatus:
		return "native-v2 run status"
	case protocol.MethodRunWatch:
		return "native-v2 run watch"
	case protocol.MethodRunLogs:
		return "native-v2 run logs"
	case protocol.MethodRunAttach:
		return "native-v2 read-only attach"
	case protocol.MethodRunForce:
		return "native-v2 force stop"
	case protocol.MethodRunHarnesses:
		return "native-v2 harness listing"
	}
	return method
}
