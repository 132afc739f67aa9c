// Package capsule assembles the default OECP backend of `oecp serve`: the
// v1 cluster and the native run surface over one store, admitted by the
// registry-backed verifier, driven by one engine supervisor (whose ledger
// routes each run to its backend's) on the built-in and host-configured
// command workers, with the host's agent harnesses, sandbox, git
// workspaces, delivery and workspace checkpoints behind the native
// backend's ports, and one retention loop for both backends. It is the one
// place that wires those rooms together; each of them stays ignorant of the
// others.
package capsule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/delivery"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/verifier"
	"github.com/oecp/oecp/workspace"
	"github.com/oecp/oecp/workspace/checkpoint"
)

// Options configure a capsule.
type Options struct {
	// Store is the store (default: a new in-memory store).
	Store   store.Store
	Tenancy cluster.Tenancy
	// Commands are the host-configured command workers (--workers).
	Commands []worker.CommandSpec
	Log      *slog.Logger
	// WrapLedger, when set, wraps the ledger the supervisor drives (the
	// backend itself is unchanged). It is a seam for tests: observing
	// what the engine records, or losing a settlement the way a crashed
	// process would.
	WrapLedger func(engine.Ledger) engine.Ledger
	// MaxActive bounds the executions running at once across every run
	// (0: DefaultMaxActive; negative: unbounded).
	MaxActive int
	// Harness is the host's harness file (--harness); nil configures no
	// harness, so every native submission is refused.
	Harness *harness.Config
	// Sandbox confines every agent execution (nil: none, as in tests that
	// need no confinement; oecp serve never passes nil with a harness).
	Sandbox *sandbox.Host
	// AgentMaxDisk is what one run's workspace, git directory and
	// checkpoint may take on disk, in bytes (0: no bound); oecp serve's
	// --agent-max-disk, which the sandbox enforces while an agent runs.
	AgentMaxDisk int64
	// RunDir holds the directories of native runs: a workspace and a
	// runtime directory each (default: oecp-runs in the system's temporary
	// directory).
	RunDir string
	// Repos is the host's repository file (--repos): runs get a clone of
	// their source and may deliver. nil records sources only.
	Repos *workspace.Repos
	// KeepWorkspaces is how long a finished run's directory stays
	// (0: workspace.DefaultKeep; negative: removed at once).
	KeepWorkspaces time.Duration
	// Observer, when set, sees the supervisor's runs and executions.
	Observer engine.Observer
	// MaxActiveRunsPerTenant bounds a tenant's unfinished native runs (0:
	// unbounded); a v1 cluster holds at most one run per tenant anyway.
	MaxActiveRunsPerTenant int
	// Retain, when positive, deletes the history of runs that ended more
	// than this long ago (retention.go); Compacted, when set, is told how
	// many.
	Retain    time.Duration
	Compacted RetentionObserver
	// CheckpointMaxBytes bounds a workspace checkpoint kept in the store
	// (0: checkpoint.DefaultMaxBytes; negative: no checkpoints, so a run
	// whose server is lost ends runtime_lost); CheckpointPush pushes
	// checkpoints to a hidden ref of the repository's remote instead.
	CheckpointMaxBytes int64
	CheckpointPush     bool
}

// Capsule is a running default backend.
type Capsule struct {
	backend *Backend
	sup     *engine.Supervisor
	ws      *workspace.Manager
	log     *slog.Logger
	retainD time.Duration
	retObs  RetentionObserver
	sandbox *sandbox.Host

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Registries returns the verifier registry and the worker registry for the
// built-ins plus the given command workers.
func Registries(cmds []worker.CommandSpec) (verifier.Registry, *worker.Registry, error) {
	workers := worker.NewRegistry()
	specs := make([]verifier.CommandWorkerSpec, 0, len(cmds))
	for _, c := range cmds {
		if err := workers.Add(c.Worker, worker.NewCommand(c)); err != nil {
			return nil, nil, err
		}
		specs = append(specs, verifier.CommandWorkerSpec{
			Worker: c.Worker, Kind: c.Kind, Input: c.InputType(), Output: c.OutputType(),
			Signals: c.Signals, Diagnostic: c.DiagnosticType(),
		})
	}
	cmdReg, err := verifier.NewCommandRegistry(specs)
	if err != nil {
		return nil, nil, fmt.Errorf("workers file: %w", err)
	}
	return verifier.Chain(verifier.BuiltinRegistry{}, cmdReg), workers, nil
}

// Verifier adapts the registry-backed verifier to the cluster's port. At
// most GOMAXPROCS verifications run at once (a hostile graph can take a
// second or two before the verifier's work ceiling rejects it); further
// plan/apply requests wait their turn, honouring cancellation, instead of
// piling CPU-bound work onto the process.
func Verifier(reg verifier.Registry) cluster.Verifier {
	v := verifier.New(reg)
	return cluster.VerifierFunc(func(ctx context.Context, g *graph.GraphSpec) (cluster.Verdict, error) {
		if err := acquireVerify(ctx); err != nil {
			return cluster.Verdict{}, err
		}
		defer releaseVerify()
		r := v.Verify(g)
		return cluster.Verdict{OK: r.OK(), Diagnostics: r.Diagnostics, Bounds: r.Bounds}, nil
	})
}

// verifySlots bounds the verifications running at once, cluster and
// native admissions together.
var verifySlots = make(chan struct{}, runtime.GOMAXPROCS(0))

func acquireVerify(ctx context.Context) error {
	select {
	case verifySlots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func releaseVerify() { <-verifySlots }

// verifyNative is the native admission's verifier under the same bound.
func verifyNative() runs.Verify {
	return func(ctx context.Context, g *graph.GraphSpec, reg verifier.Registry) (verifier.Result, error) {
		if err := acquireVerify(ctx); err != nil {
			return verifier.Result{}, err
		}
		defer releaseVerify()
		return verifier.New(reg).Verify(g), nil
	}
}

// New builds a capsule; Start runs its engine.
func New(o Options) (*Capsule, error) {
	if o.Store == nil {
		o.Store = store.NewMemory()
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	reg, workers, err := Registries(o.Commands)
	if err != nil {
		return nil, err
	}
	b := cluster.New(cluster.Config{
		Store:         o.Store,
		Verifier:      Verifier(reg),
		Tenancy:       o.Tenancy,
		GraphProfiles: []string{protocol.ProfileFull, protocol.ProfileSingleWorker},
		Logs:          true,
		AgentAttach:   true,
		Engine:        true,
		Log:           o.Log,
	})
	if o.RunDir == "" {
		o.RunDir = filepath.Join(os.TempDir(), "oecp-runs")
	}
	switch {
	case o.KeepWorkspaces == 0:
		o.KeepWorkspaces = workspace.DefaultKeep
	case o.KeepWorkspaces < 0:
		o.KeepWorkspaces = 0
	}
	ws := workspace.NewManager(o.RunDir, o.Repos, o.KeepWorkspaces, o.Log)
	rc := runs.Config{
		Store:  o.Store,
		Shared: o.Tenancy == cluster.Shared,
		Agents: &agents{cfg: o.Harness, sandbox: o.Sandbox, ws: ws, log: o.Log, runners: map[string]*harness.Runner{},
			deliver: delivery.Deliverer{Limits: workspace.Limits{MaxDisk: o.AgentMaxDisk}}},
		Verify: verifyNative(),
		Log:    o.Log,

		MaxActivePerTenant: o.MaxActiveRunsPerTenant,
	}
	if o.Repos != nil {
		rc.Workspaces = workspaces{m: ws, sandbox: o.Sandbox}
		if o.CheckpointMaxBytes >= 0 {
			k := &checkpoint.Keeper{M: ws, MaxBytes: o.CheckpointMaxBytes, Limits: workspace.Limits{MaxDisk: o.AgentMaxDisk}, Push: o.CheckpointPush, Log: o.Log}
			if k.MaxBytes == 0 {
				k.MaxBytes = checkpoint.DefaultMaxBytes
			}
			rc.Workspaces = checkpointed{workspaces{m: ws, sandbox: o.Sandbox}, k}
		}
	}
	rb := runs.New(rc)
	// Indexes an earlier release wrote move into the store's indexes
	// before anything reads them.
	if err := errors.Join(b.Upgrade(context.Background()), rb.Upgrade(context.Background())); err != nil {
		rb.Close()
		return nil, fmt.Errorf("capsule: upgrade the store: %w", err)
	}
	var ledger engine.Ledger = newLedgers(o.Store, b, rb, ownerID())
	if o.WrapLedger != nil {
		ledger = o.WrapLedger(ledger)
	}
	sup := engine.New(ledger, workers, o.Log)
	if o.Observer != nil {
		sup.SetObserver(o.Observer)
	}
	switch {
	case o.MaxActive == 0:
		sup.SetMaxActive(DefaultMaxActive)
	case o.MaxActive > 0:
		sup.SetMaxActive(o.MaxActive)
	}
	return &Capsule{backend: &Backend{Backend: b, runs: rb}, sup: sup, ws: ws, log: o.Log, retainD: o.Retain, retObs: o.Compacted, sandbox: o.Sandbox, done: make(chan struct{})}, nil
}

// Backend is the server.Backend to serve.
func (c *Capsule) Backend() *Backend { return c.backend }

// Ping reports whether the capsule's store can read and commit a write
// now; an error wraps store.ErrUnavailable (or store.ErrClosed).
func (c *Capsule) Ping(ctx context.Context) error { return c.backend.Ping(ctx) }

// Start runs the supervisor until Close, and schedules the removal of
// the directories of runs that finished before.
func (c *Capsule) Start() {
	c.ws.Sweep()
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		if c.retainD > 0 {
			retained := make(chan struct{})
			go func() { defer close(retained); c.retain(ctx, c.retainD) }()
			defer func() { <-retained }()
		}
		swept := make(chan struct{})
		go func() { defer close(swept); c.sandbox.SweepEvery(ctx, orphanSweep) }()
		defer func() { <-swept }()
		c.sup.Run(ctx)
	}()
}

// orphanSweep is how often the host is searched for sandboxes whose
// server died during their setup (this server's earlier life, or another
// server's on the same host).
const orphanSweep = 5 * time.Second

// ErrNotStarted is returned by Close on a capsule that never started.
var ErrNotStarted = errors.New("capsule: not started")

// Close stops the engine (its workers are cancelled; executions left
// active end as crash on the next start) and closes the store.
func (c *Capsule) Close() error {
	var err error
	c.once.Do(func() {
		if c.cancel != nil {
			c.cancel()
			<-c.done
		}
		c.backend.runs.Close()
		c.ws.Close()
		err = c.backend.Close()
	})
	return err
}

// ownerID names this supervising process for run leases: unique per
// process lifetime, even when a restart reuses the pid.
func ownerID() string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("pid-%d-%s", os.Getpid(), hex.EncodeToString(r[:]))
}
