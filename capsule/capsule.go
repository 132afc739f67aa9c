// Package capsule assembles the default OECP backend of `oecp serve`: the
// v1 cluster over a store, admitted by the registry-backed verifier,
// driven by the engine's supervisor on the built-in and host-configured
// command workers. It is the one place that wires those rooms together;
// each of them stays ignorant of the others.
package capsule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/verifier"
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
}

// Capsule is a running default backend.
type Capsule struct {
	backend *cluster.Backend
	sup     *engine.Supervisor

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
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	return cluster.VerifierFunc(func(ctx context.Context, g *graph.GraphSpec) (cluster.Verdict, error) {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return cluster.Verdict{}, ctx.Err()
		}
		defer func() { <-slots }()
		r := v.Verify(g)
		return cluster.Verdict{OK: r.OK(), Diagnostics: r.Diagnostics, Bounds: r.Bounds}, nil
	})
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
	var ledger engine.Ledger = b.Ledger(ownerID())
	if o.WrapLedger != nil {
		ledger = o.WrapLedger(ledger)
	}
	return &Capsule{backend: b, sup: engine.New(ledger, workers, o.Log), done: make(chan struct{})}, nil
}

// Backend is the server.Backend to serve.
func (c *Capsule) Backend() *cluster.Backend { return c.backend }

// Start runs the supervisor until Close.
func (c *Capsule) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		c.sup.Run(ctx)
	}()
}

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
