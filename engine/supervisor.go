// Package engine drives admitted runs: a supervisor reconciles every
// running run against the pure reducer (engine/reduce), records each
// dispatch in the ledger before it starts the worker (engine/worker),
// enforces the node's timeout, honours the lifecycle gate (suspension,
// drain, force stop), holds a v1 run whose failure no guard routes (the
// native mode never holds), and settles every run exactly once. All durable
// state lives behind the Ledger port (the v1 cluster backend's ledger and
// the native run backend's, over the store); the supervisor keeps only the
// in-process handles of the workers it is running.
package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/internal/lograte"
	"github.com/oecp/oecp/protocol"
)

// RunRef names one run of one tenant's cluster.
type RunRef struct {
	Tenant string
	RunID  string
}

// Snapshot is what the supervisor needs to reduce one run.
type Snapshot struct {
	Ref  RunRef
	Spec *graph.GraphSpec
	Seed json.RawMessage
	// History is every recorded execution of the run and every retry
	// grant, with ledger positions; a ledger that keeps its run's ended
	// executions in one append-only slice passes it as History.Ended (the
	// supervisor and the reducer then do not go through it again).
	History reduce.History
	// Dispatch is the run's dispatch state (active, suspended, draining,
	// force_stopping, stopped).
	Dispatch string
	// Held names the execution the run holds on (0: not held).
	Held uint64
	// Preparing says the run's gate is closed (Dispatch not active)
	// while its host prepares what it needs to run (a workspace), not
	// because a person suspended or stopped it: the run will dispatch
	// without anyone's word.
	Preparing bool
	// Native selects the reducer's native mode (reduce.ReduceNative):
	// attempt 1 only, no holds, unrouted errors set the error control.
	Native bool
	// Groups are the process groups recorded for the run's active
	// executions (Recovery.RecordGroup), by execution.
	Groups map[uint64]worker.Group
	// Worker, when set, resolves the worker of each of the run's
	// dispatches (a native run binds its nodes in its runtime plan);
	// otherwise the supervisor's registry resolves the dispatch's worker
	// reference.
	Worker func(d reduce.Dispatch) (worker.Worker, bool)
}

// Ledger is the durable side of the engine. Every method is one
// transaction; a method that cannot apply (the run moved on, the gate
// closed, the execution was voided) returns an error wrapping one of the
// sentinels below and changes nothing.
type Ledger interface {
	// Changed is closed after the next commit.
	Changed() <-chan struct{}
	// Running lists runs in phase running (a full pass; Changes names
	// the runs of the incremental ones).
	Running(ctx context.Context) ([]RunRef, error)
	// Claim takes the right to supervise a run (its lease row, taken over
	// from an owner that is gone). Every later write for the run is fenced
	// by that claim; a supervisor writes for a run only after claiming it.
	Claim(ctx context.Context, ref RunRef) error
	// Snapshot reads one run.
	Snapshot(ctx context.Context, ref RunRef) (*Snapshot, error)
	// Dispatch records the dispatches (node_begin each) before any starts.
	Dispatch(ctx context.Context, ref RunRef, ds []Dispatch) error
	// Settle records executions' outcomes (node_end each) in one
	// transaction; settlements of executions that are no longer active
	// (voided, or the run moved on) are skipped.
	Settle(ctx context.Context, ref RunRef, ss []Settlement) error
	// Crash ends executions found active with no worker behind them
	// (their process was lost): as crash, with a fault event each, or
	// recorded interrupted, so that the same attempt runs again, as the
	// ledger's runs recover.
	Crash(ctx context.Context, ref RunRef, executions []uint64) error
	// Void records voided executions (join losers, map terminals).
	Void(ctx context.Context, ref RunRef, vs []reduce.VoidLoser) error
	// Hold marks the run held on a failed execution (the retry frontier).
	Hold(ctx context.Context, ref RunRef, h reduce.Hold) error
	// Finish settles the run with its terminal result.
	Finish(ctx context.Context, ref RunRef, t reduce.Terminal) error
	// Log and Output publish an execution's live output.
	Log(ref RunRef, execution, level, message string)
	Output(ref RunRef, execution, text string)
	// ExecutionStarted/Ended bracket an execution's attach stream.
	ExecutionStarted(ref RunRef, execution string)
	ExecutionEnded(ref RunRef, execution string)

	ChangeFeed
	Recovery
	HostFaults
	LeaseKeeper
}

// Versioner is an optional Ledger extension: Version returns a number
// that changes whenever a run's durable state may have changed (0: not
// known). The supervisor then reuses its last reading of a run whose
// version and whose executions in this process are unchanged, instead of
// reading and reducing it again on every pass.
type Versioner interface {
	Version(ref RunRef) uint64
}

// Dispatch is one execution to record and start.
type Dispatch struct {
	reduce.Dispatch
	// Ref is the ExecutionRef clients attach to.
	Ref string
}

// Settlement is one finished execution.
type Settlement struct {
	Execution uint64
	Outcome   worker.Outcome
}

// Sentinels a Ledger wraps.
var (
	// ErrStale: the run is no longer the current running run.
	ErrStale = errors.New("engine: run is not current")
	// ErrGateClosed: the lifecycle gate denies new dispatch.
	ErrGateClosed = errors.New("engine: dispatch gate is closed")
	// ErrVoided: the execution was voided (e.g. by a force stop).
	ErrVoided = errors.New("engine: execution was voided")
)

// ExecutionRef is the reference of the k-th dispatch of node in a run:
// "<runId>/<node>/<k>". A client derives it from the watch stream by
// counting node_begin events of that node. When it would exceed 128 bytes
// the node name is replaced by "#" and the first 16 hex digits of its
// SHA-256.
func ExecutionRef(runID, node string, k int) string {
	ref := runID + "/" + node + "/" + strconv.Itoa(k)
	if len(ref) <= protocol.MaxExecutionRefBytes {
		return ref
	}
	sum := sha256.Sum256([]byte(node))
	ref = runID + "/#" + hex.EncodeToString(sum[:8]) + "/" + strconv.Itoa(k)
	if len(ref) > protocol.MaxExecutionRefBytes {
		ref = ref[len(ref)-protocol.MaxExecutionRefBytes:]
	}
	return ref
}

// Supervisor drives every running run of a Ledger. Its goroutines: the
// one running Run (the reconcile loop), the settle loop Run starts, one
// per worker, and, while a pass or a flush issues its ledger writes, one
// per write (runWrites).
type Supervisor struct {
	// ledger, workers and log are set by New and only read afterwards.
	ledger  Ledger
	workers *worker.Registry
	log     *slog.Logger

	mu      sync.Mutex
	running runningSet // executions this process runs; under mu
	// pending holds finished executions not yet recorded; the settle loop
	// records everything pending per run in one transaction, so a wide
	// par or map settles in a few commits rather than one per item. A
	// settlement stays pending until it commits or the run's lease is
	// lost. Under mu.
	pending map[RunRef][]pendingSettlement
	// kick wakes the settle loop: worker goroutines send without
	// blocking, the settle loop receives. Set by New.
	kick chan struct{}
	// freed wakes the reconcile loop when settlements leave the running
	// set: their commit may have woken it while they still held their
	// execution slots. Set by New.
	freed chan struct{}
	// claimed lists the runs whose lease this supervisor holds. Unguarded:
	// only the reconcile loop (the goroutine running Run) reads or
	// changes it.
	claimed map[RunRef]bool
	// wg counts worker goroutines: the reconcile loop adds (start), each
	// worker is done when it returns, and Run waits on its way out.
	wg sync.WaitGroup
	// maxActive bounds the executions this supervisor runs at once (0:
	// unbounded); see share for how waiting runs are served. Set before
	// Run starts, read-only after.
	maxActive int
	// seen is the last reading of each run, keyed by the ledger's version
	// (Versioner) and the run's executions in this process. Unguarded:
	// only the reconcile loop reads or changes it.
	seen map[RunRef]reading
	// memos are the reducer memos of the claimed runs, counts their
	// executions per node (executionCounts). Unguarded: only the
	// reconcile loop reads or changes them.
	memos  map[RunRef]*runMemo
	counts map[RunRef]*nodeCounts
	keep   claimKeeping // renewal of claims that expire
	// interrupted holds the executions a graceful shutdown cancelled.
	// Under mu.
	interrupted map[RunRef][]uint64
	// obs sees runs and executions (nil: none). Set before Run.
	obs Observer
	// dirty lists the runs the next pass reconciles afresh: runs this
	// supervisor wrote or settled, or whose read or write failed. Under
	// mu.
	dirty map[RunRef]bool
	// waiting holds the claimed runs waiting for execution slots, with
	// their last reading. Unguarded: only the reconcile loop uses it.
	waiting waitQueue
	// safetyNet is how often a full pass runs anyway (SetSafetyNet). Set
	// before Run.
	safetyNet time.Duration
	// spread holds the running runs left unclaimed at the claim cap, and
	// heldElsewhere those another process holds, since the last full
	// pass (spread.go). Unguarded: only the reconcile loop uses them.
	spread        backlog
	heldElsewhere map[RunRef]bool
	// recovered is set once a full pass has read and written what it
	// had to: until then a supervisor whose claims do not expire claims
	// every running run (spread.go). Unguarded: only the reconcile loop
	// uses it.
	recovered bool
	// idle holds the claimed runs whose last reading found them waiting
	// for a person (suspended, stopping, or held for a retry grant) with
	// none of their executions running: they do not count against the
	// claim cap (spread.go). Unguarded: only the reconcile loop uses it.
	idle map[RunRef]bool
	// hostHolds holds back the runs whose last execution its host could
	// not start (hostfault.go). Under mu.
	hostHolds map[RunRef]hostHold
	// errs bounds the repeats of the error lines of failing ledger reads
	// and writes (errors.go).
	errs lograte.Limiter
}

// reading is what one reconcile of a run found, and under which version.
type reading struct {
	version uint64
	mine    int
	want    *want
}

type runExec struct {
	ref  RunRef
	exec uint64
}

type execHandle struct {
	cancel context.CancelFunc
}

// New returns a supervisor over ledger using workers.
func New(ledger Ledger, workers *worker.Registry, log *slog.Logger) *Supervisor {
	if log == nil {
		log = slog.Default()
	}
	s := &Supervisor{ledger: ledger, workers: workers, log: log,
		pending: map[RunRef][]pendingSettlement{}, kick: make(chan struct{}, 1), freed: make(chan struct{}, 1), claimed: map[RunRef]bool{}, seen: map[RunRef]reading{}, memos: map[RunRef]*runMemo{}, counts: map[RunRef]*nodeCounts{},
		keep: claimKeeping{lost: map[RunRef]bool{}, rescan: make(chan struct{}, 1)}, interrupted: map[RunRef][]uint64{}}
	s.dirty, s.safetyNet = map[RunRef]bool{}, DefaultSafetyNet
	s.heldElsewhere = map[RunRef]bool{}
	s.hostHolds = map[RunRef]hostHold{}
	s.idle = map[RunRef]bool{}
	return s
}

// SetMaxActive bounds the executions running at once across every run
// (n <= 0: unbounded). Dispatches beyond the bound wait, and free slots go
// fairly to the waiting runs: across tenants first, then across runs. Call
// it before Run.
func (s *Supervisor) SetMaxActive(n int) { s.maxActive = max(n, 0) }

// Run reconciles until ctx is done, then cancels its workers, waits for
// them and records them interrupted (Recovery).
// Executions it leaves active are settled as crash by the next supervisor
// that starts on the same ledger.
func (s *Supervisor) Run(ctx context.Context) {
	defer func() {
		s.mu.Lock()
		s.running.cancelAll(func(RunRef) bool { return true })
		s.mu.Unlock()
		s.wg.Wait()
		s.flush(context.WithoutCancel(ctx))
		s.recordInterrupts(context.WithoutCancel(ctx))
		s.releaseClaims(context.WithoutCancel(ctx))
	}()
	keepDone := s.keepClaims(ctx)
	defer func() { <-keepDone }()
	settleDone := make(chan struct{})
	go func() {
		defer close(settleDone)
		s.settleLoop(ctx)
	}()
	defer func() { <-settleDone }()
	// A reconcile whose writes failed (the store cannot write) is tried
	// again after a backoff, since no commit may come to wake it.
	var b backoff
	plan := passPlan{full: true}
	safety := time.NewTicker(s.safetyNet)
	defer safety.Stop()
	trailing, _ := s.ledger.(TrailingFeed)
	for {
		changed := s.ledger.Changed()
		var fed <-chan struct{}
		if trailing != nil {
			fed = trailing.Named()
		}
		var retry <-chan time.Time
		failed, gap := s.next(ctx, &plan)
		if failed {
			// A failing ledger is retried at the backoff's pace, not at
			// the full passes' (a full pass the feed asks for waits too).
			retry, gap = time.After(b.next()), nil
		} else {
			b.reset()
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-fed:
		case <-s.keep.rescan:
			plan.full = true
		case <-s.freed:
		case <-retry:
		case <-gap:
		case <-safety.C:
			plan.full = true
		}
	}
}

// want is a run's next dispatch batch, waiting for its share of the
// execution slots.
type want struct {
	snap *Snapshot
	ds   []reduce.Dispatch
}

// reduceSnapshot folds a snapshot in its run's reducer mode, with the
// run's memo.
func (s *Supervisor) reduceSnapshot(snap *Snapshot) (reduce.Result, error) {
	return s.memo(snap.Ref).reduce(snap.Spec, snap.Seed, snap.History, snap.Native)
}

// memo is the run's reducer memo.
func (s *Supervisor) memo(ref RunRef) *runMemo {
	m := s.memos[ref]
	if m == nil {
		m = &runMemo{}
		s.memos[ref] = m
	}
	return m
}

// reconcile brings one run one step forward. A run that wants to
// dispatch is returned as a want (reconcileAll starts what the execution
// slots allow); any other step is returned as a write, which reconcileAll
// issues with the other runs' writes.
func (s *Supervisor) reconcile(ctx context.Context, ref RunRef) (*want, *write, error) {
	wasIdle := s.idle[ref]
	delete(s.idle, ref) // step marks it again
	snap, err := s.ledger.Snapshot(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	// Executions the ledger thinks active (never one of History.Ended):
	// ours keep running; others were orphaned by a previous process (or
	// are another process's, if this one lost the run without knowing it
	// yet) and end as crash.
	var orphans []uint64
	active := map[uint64]bool{}
	s.mu.Lock()
	for _, e := range snap.History.Executions {
		if e.State != reduce.StateActive {
			continue
		}
		active[e.Execution] = true
		if _, ok := s.running.get(runExec{ref, e.Execution}); !ok {
			orphans = append(orphans, e.Execution)
		}
	}
	// Cancel workers whose execution the ledger voided (force stop).
	for exec, h := range s.running.of(ref) {
		if !active[exec] {
			h.cancel()
		}
	}
	s.mu.Unlock()
	if len(orphans) > 0 {
		return nil, &write{ref: ref, msg: "engine: reconcile", do: func(ctx context.Context) error {
			// The crash is recorded before anything is killed: its
			// write is fenced by this process's claim, so a process
			// that lost the run (stopped past its lease, say) is refused
			// there and never kills the new owner's running executions.
			if err := s.ledger.Crash(ctx, ref, orphans); err != nil {
				return err
			}
			s.killLeft(ctx, snap, orphans)
			return nil
		}}, nil
	}
	w, wr := s.step(snap, len(active))
	if s.idle[ref] && !wasIdle {
		s.freedClaim() // its place under the claim cap is free
	}
	return w, wr, nil
}

// step decides a run's next step from its reduction; active is the number
// of its active executions.
func (s *Supervisor) step(snap *Snapshot, active int) (*want, *write) {
	ref := snap.Ref
	act := func(do func(ctx context.Context) error) *write {
		return &write{ref: ref, msg: "engine: reconcile", do: do}
	}
	res, err := s.reduceSnapshot(snap)
	if err != nil {
		if active > 0 {
			return nil, nil // settle what runs first
		}
		s.log.Warn("engine: reducer error ends the run", "run", ref.RunID, "err", err)
		t := reduce.Terminal{Status: reduce.TerminalFailed, Reason: reduce.FailureReason(err)}
		return nil, act(func(ctx context.Context) error { return s.finish(ctx, ref, t) })
	}
	if vs := res.Voids(); len(vs) > 0 {
		s.mu.Lock()
		for _, v := range vs {
			if h, ok := s.running.get(runExec{ref, v.Execution}); ok {
				h.cancel()
			}
		}
		s.mu.Unlock()
		return nil, act(func(ctx context.Context) error { return s.ledger.Void(ctx, ref, vs) })
	}
	if t := res.Terminal; t != nil {
		if active > 0 {
			return nil, nil
		}
		return nil, act(func(ctx context.Context) error { return s.finish(ctx, ref, *t) })
	}
	if ds := res.Dispatches(); len(ds) > 0 {
		if snap.Dispatch != protocol.DispatchActive {
			// Suspended or stopping: the gate holds new work.
			if active == 0 && !snap.Preparing {
				s.idle[ref] = true
			}
			return nil, nil
		}
		if s.heldByHost(ref) {
			return nil, nil // its host could not start the last one: wait
		}
		return &want{snap: snap, ds: ds}, nil
	}
	if hs := res.Holds(); len(hs) > 0 && active == 0 && snap.Held != hs[0].Execution {
		return nil, act(func(ctx context.Context) error { return s.ledger.Hold(ctx, ref, hs[0]) })
	}
	if active == 0 {
		s.idle[ref] = true // held for a retry grant
	}
	return nil, nil
}

// start runs one execution's worker in its own goroutine; its attach
// stream is already open (dispatch) and the goroutine ends it. Its
// dispatch was recorded at; run decides the run's terminal at its
// settlement.
func (s *Supervisor) start(ctx context.Context, snap *Snapshot, d Dispatch, at time.Time, run *finishing) {
	ref := snap.Ref
	node := findNode(snap.Spec, d.Occurrence.Node)
	timeout := time.Duration(d.TimeoutMs) * time.Millisecond
	wctx, cancel := context.WithCancel(ctx)
	key := runExec{ref, d.Execution}
	s.mu.Lock()
	s.running.add(key, &execHandle{cancel: cancel})
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		label := s.workerLabel(snap, d.Dispatch)
		if s.obs != nil {
			s.obs.ExecutionStarted(label, time.Since(at))
		}
		tctx, span := traceExecution(wctx, ref, d, node, label)
		outcome := s.execute(tctx, snap, d, node, timeout)
		endExecution(ctx, wctx, span, outcome)
		s.ledger.ExecutionEnded(ref, d.Ref)
		s.observeEnded(ctx, wctx, label, outcome)
		if ctx.Err() != nil && outcome.IsError() {
			// A graceful shutdown cancelled it: it is interrupted, not
			// failed (recordInterrupts). A worker that finished with a
			// result before it saw the shutdown is settled with it, so
			// its side effects are not repeated.
			s.mu.Lock()
			s.interrupted[ref] = append(s.interrupted[ref], d.Execution)
			s.running.remove(key)
			s.mu.Unlock()
			return
		}
		if wctx.Err() != nil && ctx.Err() == nil && !outcome.timedOut {
			// A void or a lost claim: the ledger already decided.
			s.forget(key)
			return
		}
		if outcome.HostFault != "" {
			if s.hostFault(ctx, ref, key, d.Ref, outcome.HostFault) {
				return
			}
		} else {
			s.hostStarted(ref)
		}
		s.mu.Lock()
		s.pending[ref] = append(s.pending[ref], pendingSettlement{Settlement: Settlement{Execution: d.Execution, Outcome: outcome.Outcome}, ref: d.Ref, run: run})
		s.mu.Unlock()
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}()
}

func (s *Supervisor) forget(key runExec) {
	s.mu.Lock()
	s.running.remove(key)
	s.mu.Unlock()
}

type result struct {
	worker.Outcome
	timedOut bool
}

// execute runs the worker under the node's timeout and checks its outcome
// against the node's declared contract.
func (s *Supervisor) execute(ctx context.Context, snap *Snapshot, d Dispatch, node graph.Node, timeout time.Duration) result {
	ref := snap.Ref
	lookup := func() (worker.Worker, bool) { return s.workers.Lookup(d.Worker) }
	if snap.Worker != nil {
		lookup = func() (worker.Worker, bool) { return snap.Worker(d.Dispatch) }
	}
	w, ok := lookup()
	if !ok {
		s.ledger.Log(ref, d.Ref, "error", "no worker is registered as "+d.Worker)
		return result{Outcome: worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure)}
	}
	tctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		tctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	ex := worker.Execution{
		Ref: d.Ref, Node: d.Occurrence.Node, Attempt: int64(d.Attempt), Input: d.Input,
		Sinks: worker.Sinks{
			Log:    func(level, msg string) { s.ledger.Log(ref, d.Ref, level, msg) },
			Output: func(text string) { s.ledger.Output(ref, d.Ref, text) },
		},
		Started: func(pgid int) { s.recordGroup(ctx, ref, d, pgid) },
	}
	o := w.Run(tctx, ex)
	if errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return result{Outcome: worker.Failed(worker.CodeTimeout, worker.ReasonDeclaredFailure), timedOut: true}
	}
	return result{Outcome: checkOutcome(o, node)}
}

// checkOutcome enforces the node's contract: a step's output must match
// its declared output type; a verifier must label every declared signal
// field with a declared label and match output and diagnostic types.
// Anything else is malformed.
func checkOutcome(o worker.Outcome, node graph.Node) worker.Outcome {
	malformed := worker.Failed(worker.CodeMalformed, worker.ReasonMalformedResult)
	if o.IsError() {
		return o
	}
	switch n := node.(type) {
	case *graph.Step:
		if o.Status != "verified" || n.Output.Validate(orNull(o.Output)) != nil {
			return malformed
		}
	case *graph.Verifier:
		if o.Status != "verifier" || n.Output.Validate(orNull(o.Output)) != nil || n.Diagnostic.Validate(orNull(o.Diagnostic)) != nil {
			return malformed
		}
		for field, labels := range n.Signals {
			got, ok := o.Signals[field]
			if !ok || !containsLabel(labels, got) {
				return malformed
			}
		}
		for field := range o.Signals {
			if _, ok := n.Signals[field]; !ok {
				return malformed
			}
		}
	default:
		return malformed
	}
	return o
}

func containsLabel(labels []string, l string) bool {
	for _, x := range labels {
		if x == l {
			return true
		}
	}
	return false
}

func orNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}

// findNode returns the executable named name.
func findNode(g *graph.GraphSpec, name string) graph.Node {
	var found graph.Node
	graph.Walk(g, func(n graph.Node, _ graph.Path, _ int) bool {
		if found != nil {
			return false
		}
		switch x := n.(type) {
		case *graph.Step:
			if x.Name == name {
				found = n
			}
		case *graph.Verifier:
			if x.Name == name {
				found = n
			}
		}
		return found == nil
	})
	return found
}

// String describes a run reference.
func (r RunRef) String() string { return fmt.Sprintf("%s/%s", r.Tenant, r.RunID) }
