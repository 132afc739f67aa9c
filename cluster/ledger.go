package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/internal/runclaims"
	"github.com/oecp/oecp/internal/terminal"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// The Ledger is the engine's port to the backend (engine.Ledger), and the
// only way an engine drives runs: the durable execution log of a run is
// kept in the tenant's state next to the lifecycle that gates it, so that
// an execution's dispatch record, its node_begin and the gate check commit
// in one transaction. Every write is fenced by the run's supervision lease
// and fails with engine.ErrStale once the run is no longer the tenant's
// running run, and a dispatch fails with engine.ErrGateClosed unless the
// dispatch gate is active.
//
// Watch-event mapping of engine records:
//
//	dispatch      node_begin {node, attempt, input}
//	settlement    node_end {node, attempt, outcome}
//	crash         node_end (error crash/declared_failure) + fault
//	              (aborted, turn_failed) naming the executionRef
//	void          fault (aborted, no_observable_effect) naming the
//	              executionRef: a par/map loser that will not end
//	interrupt     fault (unavailable, no_observable_effect, retryable)
//	              naming the executionRef: a graceful shutdown cancelled
//	              it; after the restart a fresh node_begin of the same
//	              attempt follows
//	process group nothing (the group an active execution's worker
//	              started is kept for the cleanup after a crash)
//	force stop    bookmark per execution in flight; the run's finished
//	              event follows in the same commit
//	hold / retry  bookmark
//	run result    finished (get then carries terminalResult)
//
// So every node_begin is followed by exactly one node_end, one void or
// interrupt fault, or the run's finished event.

// Ledger is the Backend seen as the engine's ledger, for one supervising
// process (owner). It is safe for concurrent use.
type Ledger struct {
	b *Backend
	// Keeper claims, fences, renews and releases the runs' leases (it
	// makes the Ledger an engine.LeaseKeeper).
	*runclaims.Keeper

	logs logCache
	// listed is what Changes last listed.
	listed listing
}

var _ engine.Ledger = (*Ledger)(nil)

// Ledger returns the engine.Ledger view of b for the supervising process
// owner (an id unique to this process lifetime). Build the backend with
// Config.Engine set when an engine drives it.
func (b *Backend) Ledger(owner string) *Ledger {
	return b.LedgerOf(store.NewClaims(b.store, owner))
}

// LedgerOf is Ledger with the claims of the supervising process, which
// it may share with the ledger of another backend on the same store (one
// renewal then judges both).
func (b *Backend) LedgerOf(claims *store.Claims) *Ledger {
	return &Ledger{b: b, Keeper: runclaims.New(claims)}
}

// runningKey is the store record listing every running run (tenant key →
// run id), so that a restarted engine finds the runs it must supervise. No
// tenant key can collide with it (tenant keys start with "t:" or "*").
const runningKey = "\x00running"

// setRunning records (or clears, with runID "") the running run of tenant.
func setRunning(tx store.Tx, tenant, runID string) error {
	c, ok, err := tx.Cluster(runningKey)
	if err != nil {
		return err
	}
	m := map[string]string{}
	if ok {
		if err := json.Unmarshal(c.Data, &m); err != nil {
			return fmt.Errorf("cluster: corrupt running-run index: %w", err)
		}
	}
	if runID == "" {
		if _, had := m[tenant]; !had {
			return nil
		}
		delete(m, tenant)
	} else {
		m[tenant] = runID
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return tx.PutCluster(runningKey, store.Cluster{Version: c.Version + 1, Data: data})
}

func turnOf(exec uint64) string { return "x" + strconv.FormatUint(exec, 10) }

// graphCache keeps decoded specs by identity (they are immutable).
type graphCache struct {
	mu sync.Mutex
	m  map[string]*graph.GraphSpec
}

func (c *graphCache) get(ident string, spec []byte) (*graph.GraphSpec, error) {
	c.mu.Lock()
	g, ok := c.m[ident]
	c.mu.Unlock()
	if ok {
		return g, nil
	}
	g, err := graph.Decode(spec)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*graph.GraphSpec{}
	}
	if len(c.m) > 64 {
		clear(c.m)
	}
	c.m[ident] = g
	c.mu.Unlock()
	return g, nil
}

// Changed is closed after the next commit.
func (l *Ledger) Changed() <-chan struct{} { return l.b.store.Changed() }

// Running lists every running run.
func (l *Ledger) Running(ctx context.Context) ([]engine.RunRef, error) {
	b := l.b
	var out []engine.RunRef
	err := b.store.View(ctx, func(tx store.ReadTx) error {
		c, ok, err := tx.Cluster(runningKey)
		if err != nil || !ok {
			return err
		}
		m := map[string]string{}
		if err := json.Unmarshal(c.Data, &m); err != nil {
			return err
		}
		for tenant, run := range m {
			out = append(out, engine.RunRef{Tenant: tenant, RunID: run})
		}
		return nil
	})
	return out, err
}

// updateState runs fn on the tenant's state in one transaction and saves
// it.
func (b *Backend) updateState(ctx context.Context, tenant string, fn func(tx store.Tx, st *state) error) error {
	return b.store.Update(ctx, func(tx store.Tx) error {
		st, version, err := load(tx, tenant)
		if err != nil {
			return err
		}
		if err := fn(tx, st); err != nil {
			return err
		}
		return save(tx, tenant, st, version)
	})
}

// ledgerUpdate runs fn on the run's state if it is still the tenant's
// running run and this process still holds its lease.
func (l *Ledger) ledgerUpdate(ctx context.Context, ref engine.RunRef, fn func(tx store.Tx, st *state) error) error {
	return l.b.updateState(ctx, ref.Tenant, func(tx store.Tx, st *state) error {
		if st.Phase != protocol.PhaseRunning || st.RunID != ref.RunID {
			return engine.ErrStale
		}
		if err := l.Check(tx, ref); err != nil {
			return err
		}
		return fn(tx, st)
	})
}

// Snapshot reads what the reducer needs.
func (l *Ledger) Snapshot(ctx context.Context, ref engine.RunRef) (*engine.Snapshot, error) {
	b := l.b
	var snap *engine.Snapshot
	err := b.store.View(ctx, func(tx store.ReadTx) error {
		st, _, err := load(tx, ref.Tenant)
		if err != nil {
			return err
		}
		if st.Phase != protocol.PhaseRunning || st.RunID != ref.RunID {
			return engine.ErrStale
		}
		run, ok, err := tx.Run(ref.Tenant, ref.RunID)
		if err != nil {
			return err
		}
		if !ok {
			return engine.ErrStale
		}
		g, err := b.graphs.get(st.Identity, st.Spec)
		if err != nil {
			return fmt.Errorf("cluster: committed spec does not decode: %w", err)
		}
		snap = &engine.Snapshot{Ref: ref, Spec: g, Seed: run.Seed, Dispatch: st.Op.Gate, Held: st.Held}
		if snap.History.Ended, err = l.logs.read(tx, ref, st.Logged); err != nil {
			return err
		}
		for _, e := range st.Execs {
			x, err := e.execution()
			if err != nil {
				return err
			}
			snap.History.Executions = append(snap.History.Executions, x)
			if e.Group != nil && e.End == 0 {
				if snap.Groups == nil {
					snap.Groups = map[uint64]worker.Group{}
				}
				snap.Groups[e.Exec] = *e.Group
			}
		}
		for _, gr := range st.Grants {
			snap.History.Grants = append(snap.History.Grants, reduce.RetryGrant{Execution: gr})
		}
		return nil
	})
	if errors.Is(err, engine.ErrStale) {
		l.logs.forget(ref)
	}
	return snap, err
}

// Dispatch records a batch of executions, a node_begin each, if the
// dispatch gate is active.
func (l *Ledger) Dispatch(ctx context.Context, ref engine.RunRef, ds []engine.Dispatch) error {
	return l.ledgerUpdate(ctx, ref, func(tx store.Tx, st *state) error {
		if st.Op.Gate != protocol.DispatchActive {
			return engine.ErrGateClosed
		}
		for _, d := range ds {
			in, err := protocol.NormalizeValue(d.Input)
			if err != nil {
				return err
			}
			if err := appendRecord(tx, ref.Tenant, st, func(*state) protocol.WatchEvent {
				v := protocol.Value(in)
				return protocol.WatchEvent{Type: protocol.EventNodeBegin, Node: &protocol.NodeRef{Node: d.Occurrence.Node, Attempt: int64(d.Attempt)}, Input: &v}
			}); err != nil {
				return err
			}
			st.Execs = append(st.Execs, execRecord{
				Exec: d.Execution, Instance: d.NodeInstance, Node: d.Occurrence.Node, Map: d.Occurrence.MapIndices,
				Attempt: d.Attempt, Input: json.RawMessage(in), Ref: d.Ref, Begin: st.Cursor,
			})
		}
		// A dispatch after a retry consumes the reserved retry turn.
		st.PendingRetry = ""
		st.Held = 0
		return nil
	})
}

// endExecs ends each execution of items that is still open: end records
// on it what ended it and returns the event that ends it, whose cursor
// becomes the execution's End; then after, if set, runs, and the ended
// execution moves from the state to the run's execution log. An execution
// that is unknown or has already ended (a settlement racing a void or a
// stop) is skipped. A draining run whose last execution ended finishes.
func endExecs[T any](tx store.Tx, tenant string, st *state, items []T, exec func(T) uint64,
	end func(T, *execRecord) (protocol.WatchEvent, error), after func(T, *execRecord) error) error {
	for _, it := range items {
		i, found := st.exec(exec(it))
		if !found || st.Execs[i].End != 0 {
			continue
		}
		e := &st.Execs[i]
		ev, err := end(it, e)
		if err != nil {
			return err
		}
		if err := appendRecord(tx, tenant, st, func(*state) protocol.WatchEvent { return ev }); err != nil {
			return err
		}
		e.End, e.Group = st.Cursor, nil
		if after != nil {
			if err := after(it, e); err != nil {
				return err
			}
		}
		st.ended = append(st.ended, *e)
		st.Execs = slices.Delete(st.Execs, i, i+1)
	}
	if st.Op.Gate == protocol.DispatchDraining && st.inFlight() == 0 {
		return finish(tx, tenant, st)
	}
	return nil
}

func nodeEnd(e *execRecord, outcome json.RawMessage) protocol.WatchEvent {
	return protocol.WatchEvent{Type: protocol.EventNodeEnd, Node: &protocol.NodeRef{Node: e.Node, Attempt: int64(e.Attempt)}, Outcome: outcome}
}

// Settle records outcomes (node_end each).
func (l *Ledger) Settle(ctx context.Context, ref engine.RunRef, ss []engine.Settlement) error {
	return l.ledgerUpdate(ctx, ref, func(tx store.Tx, st *state) error {
		return endExecs(tx, ref.Tenant, st, ss, func(s engine.Settlement) uint64 { return s.Execution },
			func(s engine.Settlement, e *execRecord) (protocol.WatchEvent, error) {
				raw, err := json.Marshal(s.Outcome)
				if err != nil {
					return protocol.WatchEvent{}, err
				}
				e.Outcome = raw
				st.History = reasonSuccess
				if s.Outcome.IsError() {
					st.History = reasonExhausted
				}
				return nodeEnd(e, raw), nil
			}, nil)
	})
}

// Crash ends executions a previous process left active. On a store
// shared by replicas the process that ran them was lost with its server
// (another replica took the run over, or the replica came back): each is
// recorded interrupted with a fault naming it, so the same attempt runs
// again from the start of its input; the attempt is not spent. On a store
// of one server (memory, SQLite) they end as crash, with a fault each,
// and the next attempt, if any, runs: the reference's behaviour after a
// restart. Either way their attach streams end on every replica (their
// own process can no longer end them).
func (l *Ledger) Crash(ctx context.Context, ref engine.RunRef, execs []uint64) error {
	var ended []string
	end := l.crashed
	if store.IsShared(l.b.store) {
		end = l.lost
	}
	err := l.ledgerUpdate(ctx, ref, func(tx store.Tx, st *state) error {
		ended = ended[:0]
		return end(tx, ref, st, execs, func(e *execRecord) { ended = append(ended, e.Ref) })
	})
	if err == nil {
		for _, x := range ended {
			l.b.endExecution(ref.Tenant, x)
		}
	}
	return err
}

// crashed settles executions as crash, with a fault event each; ended
// sees each.
func (l *Ledger) crashed(tx store.Tx, ref engine.RunRef, st *state, execs []uint64, ended func(*execRecord)) error {
	crash, err := json.Marshal(worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure))
	if err != nil {
		return err
	}
	return endExecs(tx, ref.Tenant, st, execs, func(x uint64) uint64 { return x },
		func(_ uint64, e *execRecord) (protocol.WatchEvent, error) {
			e.Outcome = crash
			st.History = reasonExhausted
			ended(e)
			return nodeEnd(e, crash), nil
		},
		func(x uint64, e *execRecord) error {
			ev, err := faultEvent(engineFault("crash-"+turnOf(x), e.Ref, "turn_failed", "retryable", "retry", "error",
				"execution was running when the server stopped; it ends as crash"))
			if err != nil {
				return err
			}
			return appendRecord(tx, ref.Tenant, st, func(*state) protocol.WatchEvent { return ev })
		})
}

// lost records executions lost with the replica that ran them as
// interrupted, with a fault event each: neither failed, so the reducer
// dispatches the same attempt again. ended sees each.
func (l *Ledger) lost(tx store.Tx, ref engine.RunRef, st *state, execs []uint64, ended func(*execRecord)) error {
	return interrupted(tx, ref, st, execs, "lost-",
		"execution was running on a server that was lost; the same attempt runs again", ended)
}

// Interrupt records executions a graceful shutdown cancelled (a fault
// event each): neither failed, so the reducer dispatches the same attempt
// again.
func (l *Ledger) Interrupt(ctx context.Context, ref engine.RunRef, execs []uint64) error {
	return l.ledgerUpdate(ctx, ref, func(tx store.Tx, st *state) error {
		return interrupted(tx, ref, st, execs, "interrupt-",
			"execution interrupted by a server shutdown; the same attempt runs again when the server is back", nil)
	})
}

// Unstarted records executions their host could not start as
// interrupted (a fault event each naming why): the same attempt runs
// again.
func (l *Ledger) Unstarted(ctx context.Context, ref engine.RunRef, execs []uint64, why string) error {
	return l.ledgerUpdate(ctx, ref, func(tx store.Tx, st *state) error {
		return interrupted(tx, ref, st, execs, "unstarted-",
			"execution could not start on this server: "+why+"; the same attempt runs again shortly", nil)
	})
}

// interrupted ends executions as interrupted, with an unavailable fault
// event each (its id prefix, then the execution's turn; message says
// what happened): the execution did not fail, so the reducer dispatches
// the same attempt again. ended, when set, sees each.
func interrupted(tx store.Tx, ref engine.RunRef, st *state, execs []uint64, prefix, message string, ended func(*execRecord)) error {
	return endExecs(tx, ref.Tenant, st, execs, func(x uint64) uint64 { return x },
		func(x uint64, e *execRecord) (protocol.WatchEvent, error) {
			e.Interrupted = true
			if ended != nil {
				ended(e)
			}
			f := engineFault(prefix+turnOf(x), e.Ref, "no_observable_effect", "retryable", "wait", "warning", message)
			f.Code = "unavailable"
			return faultEvent(f)
		}, nil)
}

// errUnchanged ends a ledger transaction that has nothing to write.
var errUnchanged = errors.New("cluster: nothing to change")

// RecordGroup records the process group an open execution's worker
// started; it appends no event.
func (l *Ledger) RecordGroup(ctx context.Context, ref engine.RunRef, exec uint64, g worker.Group) error {
	err := l.ledgerUpdate(ctx, ref, func(_ store.Tx, st *state) error {
		i, found := st.exec(exec)
		if !found || st.Execs[i].End != 0 {
			return errUnchanged
		}
		st.Execs[i].Group = &g
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// Void records voided executions (a fault event each).
func (l *Ledger) Void(ctx context.Context, ref engine.RunRef, vs []reduce.VoidLoser) error {
	return l.ledgerUpdate(ctx, ref, func(tx store.Tx, st *state) error {
		return endExecs(tx, ref.Tenant, st, vs, func(v reduce.VoidLoser) uint64 { return v.Execution },
			func(v reduce.VoidLoser, e *execRecord) (protocol.WatchEvent, error) {
				e.Void = string(v.Reason)
				return faultEvent(engineFault("void-"+turnOf(v.Execution), e.Ref, "no_observable_effect", "not_retryable", "none", "info",
					"execution voided ("+string(v.Reason)+"): node "+e.Node))
			}, nil)
	})
}

// Hold makes the held execution the run's retry frontier.
func (l *Ledger) Hold(ctx context.Context, ref engine.RunRef, h reduce.Hold) error {
	return l.ledgerUpdate(ctx, ref, func(tx store.Tx, st *state) error {
		if st.Held == h.Execution {
			return nil
		}
		st.Held = h.Execution
		st.Frontier = turnOf(h.Execution)
		return appendRecord(tx, ref.Tenant, st, bookmarkEvent)
	})
}

// Finish settles the run with its result (the run's finished event).
func (l *Ledger) Finish(ctx context.Context, ref engine.RunRef, t reduce.Terminal) error {
	return l.ledgerUpdate(ctx, ref, func(tx store.Tx, st *state) error {
		if st.inFlight() > 0 {
			return errors.New("cluster: finish with executions in flight")
		}
		tr, err := terminal.Result(t)
		if err != nil {
			return err
		}
		st.Terminal = &tr
		return finish(tx, ref.Tenant, st)
	})
}

// Log publishes one log line of an execution (target = its ref) to the
// tenant's logs subscribers. A record that breaks the protocol's bounds
// in a way redaction cannot fix is dropped.
func (l *Ledger) Log(ref engine.RunRef, execution, level, message string) {
	if rest, err := logRest(protocol.LogRecord{Level: level, Target: execution, Message: message}); err == nil {
		l.b.publishLog(ref.Tenant, rest)
	}
}

// Output publishes one line of live output of an execution to its
// agent/attach subscribers.
func (l *Ledger) Output(ref engine.RunRef, execution, text string) {
	l.b.attach(ref.Tenant, execution, protocol.AttachEvent{Type: "output", Text: &text})
}

// ExecutionStarted opens an execution's attach stream (a working event).
func (l *Ledger) ExecutionStarted(ref engine.RunRef, execution string) {
	l.b.startExecution(ref.Tenant, execution)
	l.b.attach(ref.Tenant, execution, protocol.AttachEvent{Type: "working"})
}

// ExecutionEnded closes an execution's attach stream (a settled event,
// then its subscribers' streams end and new attaches answer GONE).
func (l *Ledger) ExecutionEnded(ref engine.RunRef, execution string) {
	l.b.attach(ref.Tenant, execution, protocol.AttachEvent{Type: "settled"})
	l.b.endExecution(ref.Tenant, execution)
}
