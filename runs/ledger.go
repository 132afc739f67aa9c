package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/internal/runclaims"
	"github.com/oecp/oecp/internal/terminal"
	"github.com/oecp/oecp/nativegraph"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs/changefeed"
	"github.com/oecp/oecp/runs/live"
	"github.com/oecp/oecp/runs/logbuf"
	"github.com/oecp/oecp/store"
)

// Ledger is the Backend as the engine's ledger of native runs, for one
// supervising process. Every run it lists is admitted or running; every
// write it makes for a run is fenced by the run's supervision lease and
// fails with engine.ErrStale once the run has finished (a force, for
// instance, finishes it under the engine's feet).
//
// Record mapping: a dispatch is node_started (the first one moves the run
// from admitted to running); a settlement is node_completed; a void is
// execution_voided; an execution a graceful shutdown cancelled, and one
// orphaned by a previous process, is execution_interrupted, after a warn
// log line naming it; the result is terminal. A process group an active execution's worker started is kept
// in its state, without a record. The reducer runs in native mode, so the
// engine never holds a native run.
type Ledger struct {
	b *Backend
	// Keeper claims, fences, renews and releases the runs' leases (it
	// makes the Ledger an engine.LeaseKeeper); Claim is the Ledger's own.
	*runclaims.Keeper

	mu       sync.Mutex
	versions map[engine.RunRef]uint64 // as the last Running read them
	// feed is this ledger's feed of changed runs (changes.go); foreign is
	// the store's count of foreign wake-ups at the last Changes (under
	// mu).
	feed    *changefeed.Feed
	foreign uint64
}

var (
	_ engine.Ledger         = (*Ledger)(nil)
	_ engine.Versioner      = (*Ledger)(nil)
	_ engine.SettleFinisher = (*Ledger)(nil)
	_ engine.TrailingFeed   = (*Ledger)(nil)
)

// Ledger returns the engine.Ledger view of b for the supervising process
// owner (an id unique to this process lifetime).
func (b *Backend) Ledger(owner string) *Ledger {
	return b.LedgerOf(store.NewClaims(b.store, owner))
}

// LedgerOf is Ledger with the claims of the supervising process, which
// it may share with the ledger of another backend on the same store (one
// renewal then judges both).
func (b *Backend) LedgerOf(claims *store.Claims) *Ledger {
	return &Ledger{b: b, Keeper: runclaims.New(claims), feed: b.changes.Subscribe()}
}

// Changed is closed after the next commit.
func (l *Ledger) Changed() <-chan struct{} { return l.b.store.Changed() }

// Running lists every unfinished run, the one that changed least
// recently first, and remembers each run's latest cursor as its version.
func (l *Ledger) Running(ctx context.Context) ([]engine.RunRef, error) {
	var out []engine.RunRef
	versions := map[engine.RunRef]uint64{}
	err := l.b.store.View(ctx, func(tx store.ReadTx) error {
		ix, err := tx.IndexEntries(activeKey)
		if err != nil {
			return err
		}
		for _, e := range ix {
			tk, runID := splitActive(e.Entry)
			ref := engine.RunRef{Tenant: tk, RunID: runID}
			out = append(out, ref)
			versions[ref] = e.N
		}
		return nil
	})
	l.mu.Lock()
	l.versions = versions
	l.mu.Unlock()
	return out, err
}

// Version is the run's latest cursor as the last Running read it: every
// record of a run advances it, and the state any later read sees is at
// least that new.
func (l *Ledger) Version(ref engine.RunRef) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.versions[ref]
}

// Claim takes the run's supervision lease: in a group commit when the
// store acquires leases inside its transactions, so that the claims of
// many runs share one commit.
func (l *Ledger) Claim(ctx context.Context, ref engine.RunRef) error {
	if !l.Claims().InTx() {
		return l.Keeper.Claim(ctx, ref)
	}
	name := runclaims.Lease(ref)
	var epoch uint64
	err := l.b.commit(ctx, runKey{}, func(tx store.Tx, _ []logbuf.Line) error {
		var err error
		epoch, err = l.Claims().ClaimTx(tx, name)
		return err
	})
	if err == nil {
		l.Claims().Claimed(name, epoch)
	}
	return runclaims.ClaimedElsewhere(err)
}

// write runs fn on an unfinished run this process still supervises.
func (l *Ledger) write(ctx context.Context, ref engine.RunRef, fn func(tx store.Tx, st *runState) error) error {
	err := l.b.update(ctx, ref.Tenant, ref.RunID, func(tx store.Tx, st *runState) error {
		if st.Phase == PhaseFinished {
			return engine.ErrStale
		}
		if err := l.Check(tx, ref); err != nil {
			return err
		}
		return fn(tx, st)
	})
	if errors.Is(err, errNoRun) {
		return fmt.Errorf("%w: %v", engine.ErrStale, err)
	}
	return err
}

// Snapshot reads what the reducer needs, in native mode, with the run's
// agent bindings as its workers.
func (l *Ledger) Snapshot(ctx context.Context, ref engine.RunRef) (*engine.Snapshot, error) {
	var snap *engine.Snapshot
	readAt := l.b.prep.mark()
	err := l.b.store.View(ctx, func(tx store.ReadTx) error {
		st, _, ok, err := loadRun(tx, ref.Tenant, ref.RunID)
		if err != nil {
			return err
		}
		if !ok || st.Phase == PhaseFinished {
			return engine.ErrStale
		}
		sub, err := l.b.seeds.get(tx, ref.Tenant, ref.RunID)
		if err != nil {
			return err
		}
		snap = &engine.Snapshot{Ref: ref, Spec: sub.Graph, Seed: json.RawMessage(sub.InitialInput),
			Dispatch: protocol.DispatchActive, Native: true, Worker: l.b.agentWorker(ref, sub, runSpending{l, ref})}
		ready, lost := l.b.workspaceReady(runKey{ref.Tenant, ref.RunID}, sub.Source, len(st.Execs) > 0, l.Claims().Epoch(runclaims.Lease(ref)), readAt)
		if lost {
			return engine.ErrStale // being ended runtime_lost (workspaceReady)
		}
		if !ready {
			// No dispatch before the workspace is there.
			snap.Dispatch, snap.Preparing = protocol.DispatchSuspended, true
		}
		for _, x := range st.Execs {
			snap.KeepGroup(x.IDs[1], x.Group)
		}
		snap.History, err = st.history()
		return err
	})
	return snap, err
}

// history is the reducer's view of the run's executions.
func (st *runState) history() (reduce.History, error) {
	var h reduce.History
	for _, x := range st.Execs {
		e, err := x.history()
		if err != nil {
			return h, err
		}
		h.Executions = append(h.Executions, e)
	}
	return h, nil
}

// history is the reducer's view of one execution.
func (x execution) history() (reduce.Execution, error) {
	h := reduce.Execution{DispatchPosition: x.At, NodeInstance: x.IDs[0], Execution: x.IDs[1], Attempt: 1,
		Occurrence: reduce.Occurrence{Node: x.Node, MapIndices: x.Indices}, Input: x.Input, State: reduce.StateActive}
	if x.End == nil {
		return h, nil
	}
	h.Position = x.End.At
	if x.End.Interrupted {
		h.State = reduce.StateInterrupted
		return h, nil
	}
	if x.End.Void != "" {
		h.State, h.VoidReason = reduce.StateVoided, reduce.VoidReason(x.End.Void)
		return h, nil
	}
	var o worker.Outcome
	if err := json.Unmarshal(x.End.Outcome, &o); err != nil {
		return h, fmt.Errorf("runs: corrupt outcome of %s: %w", x.Ref, err)
	}
	h.State = reduce.StateSettled
	h.Outcome = &reduce.Outcome{Status: reduce.OutcomeStatus(o.Status), Output: o.Output, Signals: o.Signals, Diagnostic: o.Diagnostic, Code: o.Code, Reason: o.Reason}
	return h, nil
}

// Dispatch records the dispatches (node_started each).
func (l *Ledger) Dispatch(ctx context.Context, ref engine.RunRef, ds []engine.Dispatch) error {
	return l.write(ctx, ref, func(tx store.Tx, st *runState) error {
		st.Phase = PhaseRunning
		for _, d := range ds {
			in, err := protocol.NormalizeValue(d.Input)
			if err != nil {
				return err
			}
			st.Execs = append(st.Execs, execution{Ref: d.Ref, Node: d.Occurrence.Node, Indices: d.Occurrence.MapIndices,
				IDs: [2]uint64{d.NodeInstance, d.Execution}, Input: json.RawMessage(in)})
			x := &st.Execs[len(st.Execs)-1]
			if err := appendRecord(tx, ref.Tenant, ref.RunID, st, record{Kind: recStarted, Execution: x.Ref}); err != nil {
				return err
			}
			x.At = st.Cursor
		}
		return nil
	})
}

// settle ends the named executions that are still active; ending builds
// each one's end. A note, when given, is logged for each one first. then,
// when set, runs after them in the same transaction.
func (l *Ledger) settle(ctx context.Context, ref engine.RunRef, ids []uint64, end func(i int) ending, note string, then func(tx store.Tx, st *runState) error) error {
	// A settlement keeps the checkpoint taken after its execution; once
	// written or refused, it is not needed any more.
	defer l.b.cps.drop(runKey{ref.Tenant, ref.RunID}, ids)
	return l.write(ctx, ref, func(tx store.Tx, st *runState) error {
		for i, id := range ids {
			x := st.exec(id)
			if x == nil || x.End != nil {
				continue // voided, or already settled
			}
			if note != "" {
				line := logbuf.Line{Execution: x.Ref, Record: protocol.LogRecord{Level: "warn", Target: logTarget, Message: note}}
				if err := appendLogs(tx, ref.Tenant, ref.RunID, st, []logbuf.Line{line}); err != nil {
					return err
				}
			}
			e := end(i)
			if err := endExecution(tx, ref.Tenant, ref.RunID, st, x, e); err != nil {
				return err
			}
			if e.Outcome != nil {
				if err := l.b.saveCheckpoint(tx, runKey{ref.Tenant, ref.RunID}, id); err != nil {
					return err
				}
			}
		}
		if then != nil {
			return then(tx, st)
		}
		return nil
	})
}

// Settle records outcomes (node_completed each).
func (l *Ledger) Settle(ctx context.Context, ref engine.RunRef, ss []engine.Settlement) error {
	return l.settleThen(ctx, ref, ss, nil)
}

// SettleFinish records outcomes (node_completed each) and, when no
// execution of the run is left active and decide returns a terminal for
// its history, the run's terminal, in the same transaction.
func (l *Ledger) SettleFinish(ctx context.Context, ref engine.RunRef, ss []engine.Settlement, decide func(reduce.History) *reduce.Terminal) (bool, error) {
	finished := false
	err := l.settleThen(ctx, ref, ss, func(tx store.Tx, st *runState) error {
		// A batch applied again runs this again: decide from scratch.
		finished = false
		if st.active() > 0 {
			return nil
		}
		h, err := st.history()
		if err != nil {
			return nil // the reconcile pass reports it
		}
		t := decide(h)
		if t == nil {
			return nil
		}
		tr, err := terminal.Result(*t)
		if err != nil {
			return nil // the settlement commits; the reconcile pass reports it
		}
		finished = true
		return finishRun(tx, ref.Tenant, ref.RunID, st, tr)
	})
	if err == nil && finished {
		l.finished(ref)
	}
	return finished && err == nil, err
}

// settleThen records outcomes, then runs then (when set) in the same
// transaction.
func (l *Ledger) settleThen(ctx context.Context, ref engine.RunRef, ss []engine.Settlement, then func(tx store.Tx, st *runState) error) error {
	ids := make([]uint64, len(ss))
	outs := make([]json.RawMessage, len(ss))
	for i, s := range ss {
		raw, err := json.Marshal(s.Outcome)
		if err != nil {
			return err
		}
		ids[i], outs[i] = s.Execution, raw
	}
	return l.settle(ctx, ref, ids, func(i int) ending { return ending{Outcome: outs[i]} }, "", then)
}

// Crash records executions a previous process left active (it died, or
// another replica lost them with its host) as interrupted, like a
// graceful shutdown's: the execution did not fail, its host did, so the
// same node runs again, in a new session, in a workspace rebuilt from the
// run's latest checkpoint. A log line naming each says so.
func (l *Ledger) Crash(ctx context.Context, ref engine.RunRef, ids []uint64) error {
	return l.settle(ctx, ref, ids, func(int) ending { return ending{Interrupted: true} },
		"this execution was running on a server that was lost; the same node runs again, in a new session", nil)
}

// Interrupt records executions a graceful shutdown cancelled
// (execution_interrupted each, after a log line naming it): neither
// failed, so the reducer dispatches the same node again.
func (l *Ledger) Interrupt(ctx context.Context, ref engine.RunRef, ids []uint64) error {
	return l.settle(ctx, ref, ids, func(int) ending { return ending{Interrupted: true} },
		"this execution was interrupted by a server shutdown; the same node runs again when the server is back", nil)
}

// Unstarted records executions their host could not start (a full disk,
// a sandbox it could not set up) as interrupted, after a log line naming
// why: the execution neither ran nor failed, so the reducer dispatches
// the same node again with its attempt unspent.
func (l *Ledger) Unstarted(ctx context.Context, ref engine.RunRef, ids []uint64, why string) error {
	return l.settle(ctx, ref, ids, func(int) ending { return ending{Interrupted: true} },
		"this execution could not start on this server: "+why+"; its attempt is not spent, and the same node runs again shortly", nil)
}

// RecordGroup keeps the process group an active execution's worker
// started; it appends no record.
func (l *Ledger) RecordGroup(ctx context.Context, ref engine.RunRef, id uint64, g worker.Group) error {
	return l.write(ctx, ref, func(_ store.Tx, st *runState) error {
		if x := st.exec(id); x != nil && x.End == nil {
			x.Group = &g
		}
		return nil
	})
}

// Void records voided executions (execution_voided each).
func (l *Ledger) Void(ctx context.Context, ref engine.RunRef, vs []reduce.VoidLoser) error {
	ids := make([]uint64, len(vs))
	for i, v := range vs {
		ids[i] = v.Execution
	}
	return l.settle(ctx, ref, ids, func(i int) ending { return ending{Void: string(vs[i].Reason)} }, "", nil)
}

// Hold never applies: the native reducer does not hold.
func (l *Ledger) Hold(context.Context, engine.RunRef, reduce.Hold) error {
	return errors.New("runs: a native run never holds")
}

// Finish records the run's terminal result.
func (l *Ledger) Finish(ctx context.Context, ref engine.RunRef, t reduce.Terminal) error {
	err := l.write(ctx, ref, func(tx store.Tx, st *runState) error {
		if st.active() > 0 {
			return errors.New("runs: finish with active executions")
		}
		return finishWith(tx, ref, st, t)
	})
	if err == nil {
		l.finished(ref)
	}
	return err
}

// finishWith records the reducer's terminal t as the run's result.
func finishWith(tx store.Tx, ref engine.RunRef, st *runState, t reduce.Terminal) error {
	tr, err := terminal.Result(t)
	if err != nil {
		return err
	}
	return finishRun(tx, ref.Tenant, ref.RunID, st, tr)
}

// finished drops what this process keeps for a run it has finished. The
// run's claim stays until the supervisor drops the run and releases it
// (Release): a claim forgotten here could never be released, and its
// lease would be renewed for as long as this process lives.
func (l *Ledger) finished(ref engine.RunRef) {
	l.b.closeRun(ref.Tenant, ref.RunID)
}

// Log buffers one durable log line of an execution, fenced by the run's
// claim as it is now: the line is written only while this process still
// holds the run under the same epoch, so a process that lost the run
// (to another replica) writes nothing more for it.
func (l *Ledger) Log(ref engine.RunRef, execution, level, message string) {
	l.b.logFenced(ref.Tenant, ref.RunID, l.Claims().Fence(runclaims.Lease(ref)), execution, level, message)
}

// Output publishes one chunk of an execution's live output.
func (l *Ledger) Output(ref engine.RunRef, execution, text string) {
	key, ev := attachKey(ref.Tenant, ref.RunID, execution), live.OutputEvent(SafeText(text, protocol.RedactedAttachOutput))
	l.b.live.Publish(key, ev)
	l.b.relay.Send(key, ev, false)
}

// ExecutionStarted opens an execution's live attach stream.
func (l *Ledger) ExecutionStarted(ref engine.RunRef, execution string) {
	l.b.live.Start(attachKey(ref.Tenant, ref.RunID, execution))
}

// ExecutionEnded closes an execution's live attach stream.
func (l *Ledger) ExecutionEnded(ref engine.RunRef, execution string) {
	key := attachKey(ref.Tenant, ref.RunID, execution)
	l.b.live.End(key)
	l.b.relay.Send(key, nil, true)
}

func errorOutcome(code, reason string) json.RawMessage {
	raw, _ := json.Marshal(worker.Failed(code, reason))
	return raw
}

// agentWorker resolves a dispatch of the run to its agent binding.
func (b *Backend) agentWorker(ref engine.RunRef, sub *Submission, spend Spending) func(reduce.Dispatch) (worker.Worker, bool) {
	return func(d reduce.Dispatch) (worker.Worker, bool) {
		bind, ok := sub.Runtime.Nodes[d.Occurrence.Node]
		delivery := bind.Kind == KindGitDelivery && b.cfg.Workspaces != nil
		if !ok || (bind.Kind != KindAgent && !delivery) || b.cfg.Agents == nil {
			return nil, false
		}
		node := nativegraph.Executables(sub.Graph)[d.Occurrence.Node]
		_, verifier := node.(*graph.Verifier)
		return worker.WorkerFunc(func(ctx context.Context, ex worker.Execution) worker.Outcome {
			red := newRecordRedactor(sub)
			ex.Sinks = red.sinks(ex.Sinks)
			run := func(tap worker.Tap) worker.Outcome {
				ex.Tap = tap
				return b.cfg.Agents.RunAgent(ctx, AgentExecution{Tenant: ref.Tenant, RunID: ref.RunID,
					Harness: sub.Runtime.Harness, Provider: sub.Runtime.Provider, Binding: bind, Source: sub.Source, Node: node,
					NodeInstance: d.NodeInstance, Execution: d.Execution, Worker: ex, Spending: spend})
			}
			var out worker.Outcome
			if bind.Kind != KindAgent {
				out = red.outcome(run(nil))
			} else {
				out = red.outcome(b.withEvidence(ref.Tenant, ref.RunID, ex.Ref, red.byteValues(), run))
			}
			// A writer's work is checkpointed for its settlement, unless
			// it was cancelled (a shutdown interrupts it: it runs again).
			if (delivery || !verifier) && !errors.Is(ctx.Err(), context.Canceled) {
				b.takeCheckpoint(context.WithoutCancel(ctx), runKey{ref.Tenant, ref.RunID}, d.Execution, sub.Source, ex.Ref)
			}
			return out
		}), true
	}
}

// seedCache keeps decoded admitted submissions (they never change) by
// run: put at admission, read by each reconcile of the run, dropped when
// the run finishes here (closeRun). So a queued run is decoded once
// however long it waits. It is bounded by dropping everything when full
// (runs finished by another process are never dropped one by one).
type seedCache struct {
	mu sync.Mutex
	m  map[runKey]*Submission
}

// maxCachedSeeds bounds the decoded submissions kept in memory: well
// above the deepest queue one process is expected to hold.
const maxCachedSeeds = 1 << 16

// drop forgets a finished run's submission.
func (c *seedCache) drop(k runKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

func (c *seedCache) get(tx store.ReadTx, tk, runID string) (*Submission, error) {
	k := runKey{tk, runID}
	c.mu.Lock()
	sub, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return sub, nil
	}
	run, ok, err := tx.Run(tk, runID)
	if err != nil || !ok {
		return nil, orNoRun(err)
	}
	if sub, err = DecodeSubmission(run.Seed); err != nil {
		return nil, fmt.Errorf("runs: admitted submission of %q does not decode: %w", runID, err)
	}
	c.put(k, sub)
	return sub, nil
}

// put keeps the decoded submission of a run.
func (c *seedCache) put(k runKey, sub *Submission) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedSeeds {
		c.m = map[runKey]*Submission{}
	}
	c.m[k] = sub
}
