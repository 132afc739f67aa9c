package capsule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/server"
)

// DefaultMaxActive is the default bound on executions running at once
// across every run of the host (--max-active).
const DefaultMaxActive = 16

// Backend is what a capsule serves: the v1 cluster methods from the
// cluster backend, the run/* methods from the native run backend.
type Backend struct {
	*cluster.Backend
	runs *runs.Backend
}

var _ server.Backend = (*Backend)(nil)

// Runs is the native run backend.
func (b *Backend) Runs() *runs.Backend { return b.runs }

// RunUnary serves run/submit, run/list, run/status and run/force.
func (b *Backend) RunUnary(ctx context.Context, method string, p protocol.RunParams) (any, error) {
	return b.runs.RunUnary(ctx, method, p)
}

// RunSubscribe serves run/watch, run/logs and run/attach.
func (b *Backend) RunSubscribe(ctx context.Context, method string, p protocol.RunParams) (*server.Subscription, error) {
	return b.runs.RunSubscribe(ctx, method, p)
}

// ledgers is the engine's one ledger over both backends: a run belongs to
// the native backend when its tenant key is a native one, else to the
// cluster backend. Both share one store, so one Changed serves both.
type ledgers struct {
	cluster engine.Ledger
	native  engine.Ledger
}

func (l ledgers) of(ref engine.RunRef) engine.Ledger {
	if runs.OwnsTenantKey(ref.Tenant) {
		return l.native
	}
	return l.cluster
}

func (l ledgers) Changed() <-chan struct{} { return l.cluster.Changed() }

// Version is the native ledger's version of a native run (0: unknown).
func (l ledgers) Version(ref engine.RunRef) uint64 {
	if v, ok := l.of(ref).(engine.Versioner); ok {
		return v.Version(ref)
	}
	return 0
}

// Running lists the native runs after the clusters' (each oldest first).
func (l ledgers) Running(ctx context.Context) ([]engine.RunRef, error) {
	a, err := l.cluster.Running(ctx)
	if err != nil {
		return nil, err
	}
	b, err := l.native.Running(ctx)
	return append(a, b...), err
}

func (l ledgers) Claim(ctx context.Context, ref engine.RunRef) error {
	return l.of(ref).Claim(ctx, ref)
}

func (l ledgers) Snapshot(ctx context.Context, ref engine.RunRef) (*engine.Snapshot, error) {
	return l.of(ref).Snapshot(ctx, ref)
}

func (l ledgers) Dispatch(ctx context.Context, ref engine.RunRef, ds []engine.Dispatch) error {
	return l.of(ref).Dispatch(ctx, ref, ds)
}

func (l ledgers) Settle(ctx context.Context, ref engine.RunRef, ss []engine.Settlement) error {
	return l.of(ref).Settle(ctx, ref, ss)
}

func (l ledgers) Crash(ctx context.Context, ref engine.RunRef, execs []uint64) error {
	return l.of(ref).Crash(ctx, ref, execs)
}

func (l ledgers) Void(ctx context.Context, ref engine.RunRef, vs []reduce.VoidLoser) error {
	return l.of(ref).Void(ctx, ref, vs)
}

func (l ledgers) Hold(ctx context.Context, ref engine.RunRef, h reduce.Hold) error {
	return l.of(ref).Hold(ctx, ref, h)
}

func (l ledgers) Finish(ctx context.Context, ref engine.RunRef, t reduce.Terminal) error {
	return l.of(ref).Finish(ctx, ref, t)
}

func (l ledgers) Log(ref engine.RunRef, execution, level, message string) {
	l.of(ref).Log(ref, execution, level, message)
}

func (l ledgers) Output(ref engine.RunRef, execution, text string) {
	l.of(ref).Output(ref, execution, text)
}

func (l ledgers) ExecutionStarted(ref engine.RunRef, execution string) {
	l.of(ref).ExecutionStarted(ref, execution)
}

func (l ledgers) ExecutionEnded(ref engine.RunRef, execution string) {
	l.of(ref).ExecutionEnded(ref, execution)
}

// agents runs native agent nodes on the host's harnesses (--harness): one
// harness.Runner per configured harness. Each run works in its own
// directory under dir.
type agents struct {
	cfg *harness.Config
	dir string

	mu      sync.Mutex
	runners map[string]*harness.Runner
}

// CheckPlan is the harness file's submit-time check of a plan.
func (a *agents) CheckPlan(name string, nodes map[string]runs.Binding) error {
	bs := make(map[string]harness.Binding, len(nodes))
	for n, b := range nodes {
		bs[n] = harness.Binding{Model: b.Model, Effort: b.Effort, SessionScope: b.SessionScope, Env: b.Env}
	}
	return a.cfg.Check(name, bs)
}

func (a *agents) runner(name string) (*harness.Runner, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.runners[name]; ok {
		return r, nil
	}
	d, err := a.cfg.Driver(name)
	if err != nil {
		return nil, err
	}
	r := harness.NewRunner(d, 0)
	a.runners[name] = r
	return r, nil
}

// RunAgent runs one agent execution. Sessions are keyed by the run's
// tenant and id, so two tenants' runs of one id never share a session.
func (a *agents) RunAgent(ctx context.Context, x runs.AgentExecution) worker.Outcome {
	r, err := a.runner(x.Harness)
	if err != nil {
		return worker.Failed(worker.CodeRefusal, worker.ReasonDeclaredFailure)
	}
	runKey := sessionRun(x.Tenant, x.RunID)
	dir := filepath.Join(a.dir, filepath.FromSlash(runKey))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure)
	}
	b := x.Binding
	job := harness.Job{RunID: runKey, Instance: strconv.FormatUint(x.NodeInstance, 10), Node: x.Node, Dir: dir,
		Binding: harness.Binding{Model: b.Model, Effort: b.Effort, SessionScope: b.SessionScope, Env: b.Env}}
	return r.Run(ctx, job, x.Worker)
}

// sessionRun is the run key of the harness's sessions and of the run's
// directory: the tenant's hash (tenant keys may hold any character) and
// the run id.
func sessionRun(tenant, runID string) string {
	sum := sha256.Sum256([]byte(tenant))
	return hex.EncodeToString(sum[:8]) + "/" + runID
}

// CloseRun drops a finished run's sessions.
func (a *agents) CloseRun(tenant, runID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.runners {
		r.CloseRun(sessionRun(tenant, runID))
	}
}
