package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/metrics"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/sqlite"
	"github.com/oecp/oecp/workspace"
	"github.com/spf13/pflag"
)

// backendConfig selects and configures the cluster backend of `oecp serve`.
type backendConfig struct {
	kind    string // "default" or "fixture"
	store   string // "sqlite", "memory" or "postgres"
	dataDir string
	sync    string
	tenancy string
	workers string
	harness string
	repos   string
	// keepWorkspaces is how long a finished run's directory stays.
	keepWorkspaces time.Duration
	// maxActive bounds running executions (0: unbounded).
	maxActive int
	pg        postgresConfig
	// checkpoints move runs' workspaces between servers.
	checkpoints checkpointConfig
	// activeRunsPerTenant bounds a tenant's unfinished native runs (0:
	// unbounded).
	activeRunsPerTenant int
	// retain deletes the history of runs ended longer ago (0: keep all).
	retain time.Duration
	// metrics, when set, observes the store and the engine; onStore, when
	// set, is given the opened store (readiness).
	metrics *metrics.Metrics
	onStore func(store.Store)
	// wrapObserver, when set, wraps the engine's observer (nil: none), as
	// --idle-exit counts unfinished runs.
	wrapObserver func(engine.Observer) engine.Observer
	// agents is the agent usage accounting (--max-agent-usd-per-run).
	agents agentAccounting
	// stall ends silent agent CLIs (--agent-stall-timeout).
	stall agentStall
	// sandbox confines agent executions.
	sandbox agentConfig
}

func (b *backendConfig) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&b.kind, "backend", "default", "`default|fixture`: the real cluster, or a deterministic in-memory cluster without an engine (reference-compatible, for conformance tests)")
	fs.StringVar(&b.store, "store", "", "ledger store, `sqlite|memory|postgres` (default sqlite; postgres is shared by replicas; the fixture backend keeps memory)")
	fs.StringVar(&b.dataDir, "data", "", "data directory `DIR` of the sqlite store, and of the runs' workspaces on every store but memory (default $XDG_STATE_HOME/oecp, else ~/.local/state/oecp)")
	fs.StringVar(&b.sync, "sync", "full", "sqlite durability, `full|normal`: fsync every commit, or at WAL checkpoints")
	fs.StringVar(&b.tenancy, "tenancy", "isolated", "`isolated|shared`: one cluster per tenant, or one cluster for all")
	fs.StringVar(&b.workers, "workers", "", "JSON `FILE` of host-configured command workers")
	fs.StringVar(&b.harness, "harness", "", "JSON `FILE` of the agent harnesses native runs (run/submit) may use; without it every run/submit is refused")
	fs.StringVar(&b.repos, "repos", "", "JSON `FILE` of the repositories native runs work on, {\"owner/name\": {\"url\", \"tokenEnv\", \"forge\"}}: each run gets a clone of its source revision and may deliver to it (without it sources are only recorded and git delivery is refused)")
	fs.DurationVar(&b.keepWorkspaces, "keep-workspaces", workspace.DefaultKeep, "keep a finished native run's workspace for `DURATION` (0: remove it at once)")
	fs.IntVar(&b.maxActive, "max-active", capsule.DefaultMaxActive, "executions running at once across all runs; the rest wait, served fairly across tenants, then runs (0: unbounded)")
	b.pg.addFlags(fs)
	b.checkpoints.addFlags(fs)
	b.sandbox.addFlags(fs)
	fs.DurationVar(&b.retain, "retain", 0, "delete the history (events, logs, receipts) of runs that ended longer than `DURATION` ago; a replay from their cursors answers GONE with compactedThrough (0: keep everything)")
	fs.IntVar(&b.activeRunsPerTenant, "max-active-runs-per-tenant", 0, "`N` unfinished native runs per tenant; run/submit past it answers SERVER_BUSY (0: unbounded)")
	b.agents.addFlags(fs)
	b.stall.addFlags(fs)
}

func (b *backendConfig) validate() error {
	switch b.kind {
	case "default", "fixture":
	default:
		return fmt.Errorf("--backend %q: want default or fixture", b.kind)
	}
	switch b.store {
	case "", "memory", "sqlite":
	case "postgres":
		if err := b.pg.validate(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--store %q: want sqlite, memory or postgres", b.store)
	}
	if b.kind == "fixture" && b.store != "" && b.store != "memory" {
		return errors.New("--backend fixture keeps its state in memory: use --store memory or leave --store out")
	}
	if b.dataDir != "" && (b.store == "memory" || b.kind == "fixture") {
		return errors.New("--data names the sqlite store's directory: it does not go with --store memory or --backend fixture")
	}
	switch b.sync {
	case "full", "normal":
	default:
		return fmt.Errorf("--sync %q: want full or normal", b.sync)
	}
	switch b.tenancy {
	case "isolated", "shared":
	default:
		return fmt.Errorf("--tenancy %q: want isolated or shared", b.tenancy)
	}
	if err := b.agents.validate(); err != nil {
		return err
	}
	if err := b.stall.validate(); err != nil {
		return err
	}
	if b.keepWorkspaces < 0 {
		return fmt.Errorf("--keep-workspaces %v: want 0 or more", b.keepWorkspaces)
	}
	if b.retain < 0 {
		return fmt.Errorf("--retain %v: want a positive duration, or 0 to keep everything", b.retain)
	}
	if b.activeRunsPerTenant < 0 {
		return fmt.Errorf("--max-active-runs-per-tenant %d: want 0 (unbounded) or more", b.activeRunsPerTenant)
	}
	if b.maxActive < 0 {
		return fmt.Errorf("--max-active %d: want 0 (unbounded) or more", b.maxActive)
	}
	if err := b.checkpoints.validate(); err != nil {
		return err
	}
	return b.sandbox.validate()
}

// newBackend builds the configured backend and a function that releases it.
//
//   - fixture: the deterministic in-memory cluster the conformance goldens
//     replay against (run-N, cursor-N, sub-N; structural verifier;
//     advertises graphProfiles [], logs false, agentAttach false).
//   - default: the capsule: the cluster over the configured ledger store
//     (SQLite unless --store memory), admitted by the registry-backed
//     verifier and run by the engine on the built-in and --workers command
//     workers, advertising both graph profiles, logs and agent/attach.
func newBackend(cfg backendConfig, log *slog.Logger) (server.Backend, func(), error) {
	tenancy := cluster.Isolated
	if cfg.tenancy == "shared" {
		tenancy = cluster.Shared
	}
	if cfg.kind == "fixture" {
		b := cluster.NewFixture(tenancy)
		return b, func() { _ = b.Close() }, nil
	}
	unlock, err := lockDataDir(cfg) // datalock.go: one data directory, one server
	if err != nil {
		return nil, nil, err
	}
	started := false
	defer func() {
		if !started {
			unlock()
		}
	}()
	st, err := openStore(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	var cmds []worker.CommandSpec
	if cfg.workers != "" {
		if cmds, err = worker.LoadCommandSpecs(cfg.workers); err != nil {
			_ = st.Close()
			return nil, nil, err
		}
	}
	if cfg.metrics != nil {
		st.SetObserver(cfg.metrics)
	}
	if cfg.onStore != nil {
		cfg.onStore(st)
	}
	opts := capsule.Options{Store: st, Tenancy: tenancy, Commands: cmds, Log: log, MaxActive: max(cfg.maxActive, 0),
		MaxActiveRunsPerTenant: cfg.activeRunsPerTenant}
	if cfg.metrics != nil {
		opts.Observer, opts.Compacted = cfg.metrics, cfg.metrics
	}
	if cfg.wrapObserver != nil {
		opts.Observer = cfg.wrapObserver(opts.Observer)
	}
	opts.Retain = cfg.retain
	if cfg.maxActive == 0 {
		opts.MaxActive = -1
	}
	if cfg.harness != "" {
		if err = cfg.harnessOptions(&opts, log); err != nil {
			_ = st.Close()
			return nil, nil, err
		}
	}
	if cfg.repos != "" {
		if opts.Repos, err = workspace.LoadRepos(cfg.repos); err != nil {
			_ = st.Close()
			return nil, nil, err
		}
	}
	opts.AgentMaxDisk = cfg.sandbox.maxDisk.n
	opts.KeepWorkspaces = cfg.keepWorkspaces
	if cfg.keepWorkspaces == 0 {
		opts.KeepWorkspaces = -1
	}
	if d, ok := st.(interface{ Dir() string }); ok {
		opts.RunDir = filepath.Join(d.Dir(), "runs")
	} else if cfg.store == "postgres" {
		if opts.RunDir, err = runDir(cfg.dataDir); err != nil {
			_ = st.Close()
			return nil, nil, err
		}
	}
	cfg.checkpoints.apply(&opts)
	c, err := capsule.New(opts)
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	c.Start()
	started = true
	return c.Backend(), func() { _ = c.Close(); opts.Sandbox.Close(); unlock() }, nil
}

// harnessOptions loads the harness file into opts with its accounting,
// stall timeout and agent sandbox, and checks that every harness program
// runs where its agents will.
func (cfg backendConfig) harnessOptions(opts *capsule.Options, log *slog.Logger) error {
	h, err := harness.Load(cfg.harness)
	if err != nil {
		return err
	}
	cfg.agents.apply(h, cfg.metrics)
	cfg.stall.apply(h)
	if opts.Sandbox, err = cfg.sandbox.host(cfg, h, log); err != nil {
		return err
	}
	if err := h.CheckPrograms(context.Background(), opts.Sandbox, "", log); err != nil {
		return err
	}
	log.Info("harness programs checked: each runs where agents run", "harnesses", strings.Join(h.Names(), ","))
	opts.Harness = h
	return nil
}

// openStore opens the configured ledger store: SQLite in the data
// directory by default, or memory with --store memory.
func openStore(cfg backendConfig, log *slog.Logger) (store.Store, error) {
	switch cfg.store {
	case "memory":
		return store.NewMemory(), nil
	case "postgres":
		return cfg.pg.open(log)
	}
	dir := cfg.dataDir
	if dir == "" {
		d, err := sqlite.DefaultDir()
		if err != nil {
			return nil, fmt.Errorf("no --data directory given and no default: %w", err)
		}
		dir = d
	}
	s, err := sqlite.Open(context.Background(), sqlite.Options{Dir: dir, Sync: cfg.sync, Log: log})
	if err != nil {
		return nil, err
	}
	log.Info("ledger", "store", "sqlite", "dir", s.Dir(), "sync", cfg.sync)
	return s, nil
}
