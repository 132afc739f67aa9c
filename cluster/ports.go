package cluster

import (
	"context"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

// The backend's ports. Backend implements all of them; each is small so
// that a facade or a test double can provide just one. The store port is
// package store.

// Verifier admits graphs (plan, apply). It must not read cluster state.
// Returning an error is an internal failure (-32603, redacted); a
// rejection is a Verdict with OK false and diagnostics.
type Verifier interface {
	Verify(ctx context.Context, g *graph.GraphSpec) (Verdict, error)
}

// Verdict is a verifier's answer. Bounds is set iff OK; the graph identity
// that decides changed vs unchanged apply is computed from the graph and
// these bounds (§6.2).
type Verdict struct {
	OK          bool
	Diagnostics []graph.Diagnostic
	Bounds      *graph.Bounds
}

// StructuralVerifier approves exactly the graphs graph.Structural accepts,
// with their folded bounds. It is the fixture's verifier (it approves the
// goldens' graph with the bounds they show) and the default one until the
// registry-backed verifier is wired in.
type StructuralVerifier struct{}

// Verify runs graph.Structural.
func (StructuralVerifier) Verify(_ context.Context, g *graph.GraphSpec) (Verdict, error) {
	r := graph.Structural(g)
	return Verdict{OK: r.OK, Diagnostics: r.Diagnostics, Bounds: r.Bounds}, nil
}

// VerifierFunc adapts a function to Verifier.
type VerifierFunc func(ctx context.Context, g *graph.GraphSpec) (Verdict, error)

// Verify calls f.
func (f VerifierFunc) Verify(ctx context.Context, g *graph.GraphSpec) (Verdict, error) {
	return f(ctx, g)
}

// Admission is the admission port: verify and commit graphs, read state.
type Admission interface {
	Initialize(ctx context.Context) (*protocol.InitializeResult, error)
	Get(ctx context.Context, p protocol.GetParams) (*protocol.GetResult, error)
	Plan(ctx context.Context, p protocol.PlanParams) (*protocol.PlanResult, error)
	Apply(ctx context.Context, p protocol.ApplyParams) (*protocol.ApplyResult, error)
}

// Lifecycle is the operator lifecycle port (the five CAS'd mutations).
type Lifecycle interface {
	Update(ctx context.Context, p protocol.UpdateParams) (*protocol.UpdateResult, error)
	Stop(ctx context.Context, p protocol.StopParams) (*protocol.StopResult, error)
	Retry(ctx context.Context, p protocol.RetryParams) (*protocol.RetryResult, error)
	Resubmit(ctx context.Context, p protocol.ResubmitParams) (*protocol.ResubmitResult, error)
	Delete(ctx context.Context, p protocol.DeleteParams) (*protocol.DeleteResult, error)
}

// Observation is the subscription port.
type Observation interface {
	Watch(ctx context.Context, p protocol.WatchParams) (*server.Subscription, error)
	Logs(ctx context.Context, p protocol.LogsParams) (*server.Subscription, error)
	AgentAttach(ctx context.Context, p protocol.AgentAttachParams) (*server.Subscription, error)
}

// Engine is the in-process lifecycle API an execution engine drives (and
// the test hooks the hook-dependent goldens use). It is never reachable
// over the wire. tenant is the connection tenant (mapped with TenantKey,
// so in Shared mode any tenant names the one cluster). Every call that
// records something is one store transaction appending exactly one event
// per record, like the protocol methods; see engine.go for the contract of
// each call.
type Engine interface {
	Dispatch(ctx context.Context, tenant string, t Turn) (Lease, error)
	Complete(ctx context.Context, tenant, leaseID string, o Outcome) error
	Fail(ctx context.Context, tenant, leaseID string, o Outcome, retryable bool) error
	RecordFault(ctx context.Context, tenant string, f Fault) (string, error)
	HoldCleanup(ctx context.Context, tenant string) error
	ConfirmCleanup(ctx context.Context, tenant string) error
	PublishLog(tenant string, r protocol.LogRecord) error
	StartExecution(tenant, execution string) error
	PublishAttach(tenant, execution string, ev protocol.AttachEvent) error
	EndExecution(tenant, execution string)
}
