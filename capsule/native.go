package capsule

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/delivery"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/internal/runclaims"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/tracing"
	"github.com/oecp/oecp/workspace"
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

// RunUnary serves run/submit, run/list, run/status, run/force and
// run/harnesses.
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
	// Keeper renews and releases both ledgers' claims (one owner, one set
	// of leases).
	*runclaims.Keeper
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

// SettleFinish is the run's ledger's SettleFinish where it has one (the
// native ledger: a native run whose last execution settles ends in that
// settlement's commit); elsewhere it is Settle, and the run finishes on a
// pass of its own.
func (l ledgers) SettleFinish(ctx context.Context, ref engine.RunRef, ss []engine.Settlement, decide func(reduce.History) *reduce.Terminal) (bool, error) {
	if sf, ok := l.of(ref).(engine.SettleFinisher); ok {
		return sf.SettleFinish(ctx, ref, ss, decide)
	}
	return false, l.of(ref).Settle(ctx, ref, ss)
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

// agents runs native agent nodes on the host's harnesses (--harness), one
// harness.Runner per configured harness, and git delivery nodes. Each run
// has its own directories: agents work in its workspace, sessions keep
// their homes in its runtime directory, and the run's workspace gate
// admits one writer (a step or delivery) or any number of verifiers at a
// time, from before a session is checked out until its driver returned.
type agents struct {
	cfg     *harness.Config
	sandbox *sandbox.Host
	ws      *workspace.Manager
	deliver delivery.Deliverer
	log     *slog.Logger

	mu      sync.Mutex
	runners map[string]*harness.Runner
}

// CheckPlan is the harness file's submit-time check of a plan.
func (a *agents) CheckPlan(name string, nodes map[string]runs.Binding) error {
	bs := make(map[string]harness.Binding, len(nodes))
	for n, b := range nodes {
		if b.Kind == runs.KindAgent {
			bs[n] = harnessBinding(b)
		}
	}
	err := a.cfg.Check(name, bs)
	if err != nil {
		a.log.Info("run/submit refused by the harness file", "file", a.cfg.File(), "harness", name, "err", err)
	}
	return err
}

// HarnessEntries lists the harness file's entries for run/harnesses.
func (a *agents) HarnessEntries() []runs.HarnessEntry {
	var out []runs.HarnessEntry
	for _, name := range a.cfg.Names() {
		out = append(out, runs.HarnessEntry{Name: name, Kind: a.cfg.Kind(name)})
	}
	return out
}

func harnessBinding(b runs.Binding) harness.Binding {
	return harness.Binding{Model: b.Model, Effort: b.Effort, SessionScope: b.SessionScope, Env: b.Env}
}

func (a *agents) runner(name string) (*harness.Runner, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.runners[name]; ok {
		return r, nil
	}
	r, err := a.cfg.Runner(name)
	if err != nil {
		return nil, err
	}
	r.Confine(a.sandbox)
	a.runners[name] = r
	return r, nil
}

// RunAgent runs one agent or delivery execution in the run's workspace,
// holding its gate. Sessions are keyed by the run's tenant and id, so two
// tenants' runs of one id never share a session or a directory.
func (a *agents) RunAgent(ctx context.Context, x runs.AgentExecution) (out worker.Outcome) {
	defer func() { recordEnd(ctx, x.Worker.Sinks, out) }()
	key := workspace.Key(x.Tenant, x.RunID)
	paths, err := a.ws.Paths(key)
	if err != nil {
		a.log.Error("run directories unavailable", "run", x.RunID, "err", err)
		return worker.HostFailed("the server could not make the run's directories")
	}
	_, verifier := x.Node.(*graph.Verifier)
	delivers := x.Binding.Kind == runs.KindGitDelivery
	release, err := a.ws.Gate(key).Acquire(ctx, delivers || !verifier)
	if err != nil {
		return worker.Failed(worker.CodeRefusal, worker.ReasonDeclaredFailure) // ctx ended while waiting
	}
	defer release()
	if delivers {
		return a.delivery(ctx, x, paths)
	}
	r, err := a.runner(x.Harness)
	if err != nil {
		return worker.Failed(worker.CodeRefusal, worker.ReasonDeclaredFailure)
	}
	job := harness.Job{Key: key, Instance: strconv.FormatUint(x.NodeInstance, 10), Execution: strconv.FormatUint(x.Execution, 10),
		Node: x.Node, Binding: harnessBinding(x.Binding), Provider: x.Provider, Dir: paths.Workspace, Runtime: paths.Runtime, GitDir: paths.Git,
		Objects: a.ws.MirrorObjects(source(x.Source)), Spending: x.Spending}
	return r.Run(ctx, job, x.Worker)
}

// delivery runs a git delivery node over the run's workspace.
func (a *agents) delivery(ctx context.Context, x runs.AgentExecution, paths workspace.Paths) worker.Outcome {
	repo, ok := a.ws.Repos().Lookup(x.Source.Repository)
	v, isVerifier := x.Node.(*graph.Verifier)
	if !ok || !isVerifier {
		a.log.Error("git delivery without a served repository", "run", x.RunID, "repository", x.Source.Repository)
		return worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure)
	}
	job := delivery.Job{RunID: x.RunID, Mode: delivery.Mode(v.Worker), Source: source(x.Source), Repo: repo,
		Branch: workspace.Branch(x.Tenant, x.RunID), Paths: paths, Key: workspace.Key(x.Tenant, x.RunID), Records: a.ws,
		Input: x.Worker.Input}
	d := a.deliver
	if d.Log == nil {
		d.Log = a.log
	}
	out := d.Run(ctx, job, x.Worker.Sinks)
	recordReceipt(x.Worker.Sinks, out, repo, job.Branch)
	return out
}

// CloseRun drops a finished run's sessions and starts the retention of
// its directory. A runner's CloseRun ends the run's sandbox (its UID's
// processes found in /proc and killed), so a.mu only covers taking the
// list of runners.
func (a *agents) CloseRun(tenant, runID string) {
	a.mu.Lock()
	runners := slices.Collect(maps.Values(a.runners))
	a.mu.Unlock()
	for _, r := range runners {
		closeRunner(r, workspace.Key(tenant, runID))
	}
	// The runners share the capsule's sandbox; its run state is ended once.
	a.sandbox.CloseRun(workspace.Key(tenant, runID))
	a.ws.Finish(workspace.Key(tenant, runID))
}

// closeRunner ends a run on one runner; tests replace it.
var closeRunner = (*harness.Runner).CloseRun

// workspaces is the runs backend's Workspaces over the manager of a host
// that serves repositories, and the sandbox its agents run in (nil: none).
type workspaces struct {
	m       *workspace.Manager
	sandbox *sandbox.Host
}

func (w workspaces) CheckSource(tenant string, src runs.Source) error {
	return w.m.Repos().Check(tenant, src.Repository)
}
func (w workspaces) CheckDelivery(n graph.Node) error { return delivery.CheckNode(n) }

func (w workspaces) Prepare(ctx context.Context, tenant, runID string, src runs.Source) error {
	ctx, end := tracing.Work(ctx, tenant, runID, "workspace prepare", tracing.KeyRepository.String(src.Repository))
	key := workspace.Key(tenant, runID)
	w.sandbox.Prepare(key) // the run's network and writer UID, meanwhile
	err := w.m.PrepareFor(ctx, key, source(src), workspace.Branch(tenant, runID), func() (int, bool) { return w.sandbox.Writer(key) })
	end(err)
	if errors.Is(err, workspace.ErrRevisionNotFound) {
		return revisionNotFound{err}
	}
	return err
}

// Prepared implements runs.WorkspaceKeeper.
func (w workspaces) Prepared(tenant, runID string, src runs.Source) bool {
	return w.m.Prepared(workspace.Key(tenant, runID), source(src))
}

// revisionNotFound is the workspace's error as runs.ErrRevisionNotFound.
type revisionNotFound struct{ error }

func (revisionNotFound) Is(target error) bool { return target == runs.ErrRevisionNotFound }

func source(s runs.Source) workspace.Source {
	return workspace.Source{Repository: s.Repository, Branch: s.Branch, Revision: s.Revision}
}
