package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// This file makes the Backend the engine's Ledger (engine.Ledger): the
// durable execution log of engine-driven runs, kept in the tenant's state
// next to the lifecycle it gates, so that a dispatch, its node_begin and
// its lease commit in one transaction.
//
// Watch-event mapping of engine records:
//
//	dispatch      node_begin {node, attempt, input}
//	settlement    node_end {node, attempt, outcome}
//	crash         node_end (error crash/declared_failure) + fault
//	              (aborted, turn_failed) naming the executionRef
//	void          fault (aborted, no_observable_effect) naming the
//	              executionRef: a par/map loser that will not end
//	force stop    bookmark per open execution (as the reference); the
//	              run's finished event follows in the same commit
//	hold / retry  bookmark
//	run result    finished (get then carries terminalResult)
//
// So every node_begin is followed by exactly one node_end, one void
// fault, or the run's finished event.

// execRecord is one engine dispatch of the current run.
type execRecord struct {
	Exec     uint64          `json:"x"`
	Instance uint64          `json:"i"`
	Node     string          `json:"n"`
	Map      []uint64        `json:"m,omitempty"`
	Attempt  uint64          `json:"a"`
	Input    json.RawMessage `json:"in"`
	Ref      string          `json:"r"`
	Lease    string          `json:"l"`
	Dispatch uint64          `json:"d"`
	End      uint64          `json:"e,omitempty"`
	Outcome  json.RawMessage `json:"o,omitempty"`
	Void     string          `json:"v,omitempty"`
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

func (st *state) exec(id uint64) (int, bool) {
	for i := range st.Execs {
		if st.Execs[i].Exec == id {
			return i, true
		}
	}
	return 0, false
}

// execByLease finds the open execution behind a lease.
func (st *state) execByLease(leaseID string) (int, bool) {
	for i := range st.Execs {
		if st.Execs[i].Lease == leaseID && st.Execs[i].End == 0 {
			return i, true
		}
	}
	return 0, false
}

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

// ledgerUpdate runs fn on the run's state if it is still the tenant's
// running run.
func (l *Ledger) ledgerUpdate(ctx context.Context, ref engine.RunRef, fn func(tx store.Tx, st *state) error) error {
	return l.b.engineUpdate(ctx, ref.Tenant, func(tx store.Tx, st *state) error {
		if st.Phase != protocol.PhaseRunning || st.RunID != ref.RunID {
			return engine.ErrStale
		}
		if err := l.fence(tx, ref); err != nil {
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
		snap = &engine.Snapshot{Ref: ref, Spec: g, Seed: run.Seed, Dispatch: st.Op.Dispatch, Held: st.Held}
		for _, e := range st.Execs {
			x := reduce.Execution{
				DispatchPosition: e.Dispatch,
				NodeInstance:     e.Instance,
				Execution:        e.Exec,
				Occurrence:       reduce.Occurrence{Node: e.Node, MapIndices: e.Map},
				Attempt:          e.Attempt,
				Input:            e.Input,
				State:            reduce.StateActive,
			}
			switch {
			case e.Void != "":
				x.State, x.Position, x.VoidReason = reduce.StateVoided, e.End, reduce.VoidReason(e.Void)
			case e.End != 0:
				var o worker.Outcome
				if err := json.Unmarshal(e.Outcome, &o); err != nil {
					return err
				}
				x.State, x.Position = reduce.StateSettled, e.End
				x.Outcome = &reduce.Outcome{Status: reduce.OutcomeStatus(o.Status), Output: o.Output, Signals: o.Signals, Diagnostic: o.Diagnostic, Code: o.Code, Reason: o.Reason}
			}
			snap.History.Executions = append(snap.History.Executions, x)
		}
		for _, gr := range st.Grants {
			snap.History.Grants = append(snap.History.Grants, reduce.RetryGrant{Execution: gr})
		}
		return nil
	})
	return snap, err
}

// Dispatch records a batch of dispatches: a lease and a node_begin each.
func (l *Ledger) Dispatch(ctx context.Context, ref engine.RunRef, ds []engine.Dispatch) error {
	return l.ledgerUpdate(ctx, ref, func(tx store.Tx, st *state) error {
		if st.Op.Dispatch != protocol.DispatchActive {
			return engine.ErrGateClosed
		}
		for _, d := range ds {
			n, err := tx.NextCounter(counterLease)
			if err != nil {
				return err
			}
			in, err := protocol.NormalizeValue(d.Input)
			if err != nil {
				return err
			}
			ls := lease{ID: leaseString(n), TurnID: turnOf(d.Execution), Node: d.Occurrence.Node, Attempt: int64(d.Attempt), Execution: d.Ref, Input: in}
			st.Leases = append(st.Leases, ls)
			st.Turns = append(st.Turns, ls.TurnID)
			if err := appendRecord(tx, ref.Tenant, st, func(*state) protocol.WatchEvent {
				v := ls.Input
				return protocol.WatchEvent{Type: protocol.EventNodeBegin, Node: &protocol.NodeRef{Node: ls.Node, Attempt: ls.Attempt}, Input: &v}
			}); err != nil {
				return err
			}
			st.Execs = append(st.Execs, execRecord{
				Exec: d.Execution, Instance: d.NodeInstance, Node: d.Occurrence.Node, Map: d.Occurrence.MapIndices,
				Attempt: d.Attempt, Input: json.RawMessage(in), Ref: d.Ref, Lease: ls.ID, Dispatch: st.Cursor,
			})
		}
		// A dispatch after a retry consumes the reserved retry turn.
		st.PendingRetry = ""
		st.Held = 0
		return nil
	})
}

// endExec ends the open execution x: its lease is removed, the event
// built for it is appended, and that event's cursor becomes the
// execution's end. ok is false (and nothing changes) when x is unknown or
// has already ended — a settlement racing a void or a stop.
func endExec(tx store.Tx, tenant string, st *state, x uint64, build func(e *execRecord) (protocol.WatchEvent, error)) (e *execRecord, ok bool, err error) {
	i, found := st.exec(x)
	if !found || st.Execs[i].End != 0 {
		return nil, false, nil
	}
	e = &st.Execs[i]
	ev, err := build(e)
	if err != nil {
		return nil, false, err
	}
	if li, ok := st.lease(e.Lease); ok {
		st.Leases = append(st.Leases[:li:li], st.Leases[li+1:]...)
	}
	if err := appendRecord(tx, tenant, st, func(*state) protocol.WatchEvent { return ev }); err != nil {
		return nil, false, err
	}
	e.End = st.Cursor
	return e, true, nil
}

func nodeEnd(e *execRecord, outcome json.RawMessage) protocol.WatchEvent {
	return protocol.WatchEvent{Type: protocol.EventNodeEnd, Node: &protocol.NodeRef{Node: e.Node, Attempt: int64(e.Attempt)}, Outcome: outcome}
}

func faultEvent(f Fault) (protocol.WatchEvent, error) {
	raw, err := f.encode()
	return protocol.WatchEvent{Type: protocol.EventFault, Fault: raw}, err
}

func (b *Backend) finishIfDrained(tx store.Tx, tenant string, st *state) error {
	if st.Op.Dispatch == protocol.DispatchDraining && len(st.Leases) == 0 {
		if err := finish(tx, tenant, st); err != nil {
			return err
		}
		return setRunning(tx, tenant, "")
	}
	return nil
}

// Settle records outcomes (node_end each).
func (l *Ledger) Settle(ctx context.Context, ref engine.RunRef, ss []engine.Settlement) error {
	b := l.b
	var ended []string
	err := l.ledgerUpdate(ctx, ref, func(tx store.Tx, st *state) error {
		ended = ended[:0]
		for _, s := range ss {
			raw, err := json.Marshal(s.Outcome)
			if err != nil {
				return err
			}
			e, ok, err := endExec(tx, ref.Tenant, st, s.Execution, func(e *execRecord) (protocol.WatchEvent, error) {
				return nodeEnd(e, raw), nil
			})
			if err != nil || !ok {
				if err != nil {
					return err
				}
				continue // voided or already settled
			}
			e.Outcome = raw
			ended = append(ended, e.Lease)
			if s.Outcome.IsError() {
				st.History = reasonExhausted
			} else {
				st.History = reasonSuccess
			}
		}
		return b.finishIfDrained(tx, ref.Tenant, st)
	})
	for _, l := range ended {
		b.settleLease(ref.Tenant, l)
	}
	return err
}

func engineFault(id, ref, consequence, retry, action, severity, summary string) Fault {
	return Fault{EventID: id, ExecutionRef: ref, Code: "aborted", Consequence: consequence, Retry: retry,
		Action: action, Severity: severity, Summary: summary, Source: []FaultSource{{Component: "oecp-engine"}}}
}

// Crash settles executions left active by a previous process as crash,
// with a fault event each.
func (l *Ledger) Crash(ctx context.Context, ref engine.RunRef, execs []uint64) error {
	b := l.b
	crash, err := json.Marshal(worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure))
	if err != nil {
		return err
	}
	return l.ledgerUpdate(ctx, ref, func(tx store.Tx, st *state) error {
		for _, x := range execs {
			e, ok, err := endExec(tx, ref.Tenant, st, x, func(e *execRecord) (protocol.WatchEvent, error) {
				return nodeEnd(e, crash), nil
			})
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			e.Outcome = crash
			st.History = reasonExhausted
			ev, err := faultEvent(engineFault("crash-"+turnOf(x), e.Ref, "turn_failed", "retryable", "retry", "error",
				"execution was running when the server stopped; it ends as crash"))
			if err != nil {
				return err
			}
			if err := appendRecord(tx, ref.Tenant, st, func(*state) protocol.WatchEvent { return ev }); err != nil {
				return err
			}
		}
		return b.finishIfDrained(tx, ref.Tenant, st)
	})
}

// Void records voided executions (a fault event each).
func (l *Ledger) Void(ctx context.Context, ref engine.RunRef, vs []reduce.VoidLoser) error {
	b := l.b
	var ended []string
	err := l.ledgerUpdate(ctx, ref, func(tx store.Tx, st *state) error {
		ended = ended[:0]
		for _, v := range vs {
			e, ok, err := endExec(tx, ref.Tenant, st, v.Execution, func(e *execRecord) (protocol.WatchEvent, error) {
				return faultEvent(engineFault("void-"+turnOf(v.Execution), e.Ref, "no_observable_effect", "not_retryable", "none", "info",
					"execution voided ("+string(v.Reason)+"): node "+e.Node))
			})
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			e.Void = string(v.Reason)
			ended = append(ended, e.Lease)
		}
		return b.finishIfDrained(tx, ref.Tenant, st)
	})
	for _, l := range ended {
		b.settleLease(ref.Tenant, l)
	}
	return err
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
		if len(st.Leases) > 0 {
			return errors.New("cluster: finish with open executions")
		}
		tr := &protocol.TerminalResult{Status: string(t.Status)}
		if t.Status == reduce.TerminalSucceeded {
			out, err := protocol.NormalizeValue(orNull(t.Output))
			if err != nil {
				return err
			}
			tr.Output = &out
		} else {
			tr.Reason = t.Reason
		}
		st.Terminal = tr
		if err := finish(tx, ref.Tenant, st); err != nil {
			return err
		}
		return setRunning(tx, ref.Tenant, "")
	})
}

func orNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}

// Log publishes one log line of an execution (target = its ref).
func (l *Ledger) Log(ref engine.RunRef, execution, level, message string) {
	b := l.b
	if rest, err := logRest(protocol.LogRecord{Level: level, Target: execution, Message: message}); err == nil {
		b.publishLogKey(ref.Tenant, rest)
	}
}

// Output publishes one line of live output of an execution.
func (l *Ledger) Output(ref engine.RunRef, execution, text string) {
	b := l.b
	b.attach(ref.Tenant, execution, protocol.AttachEvent{Type: "output", Text: &text})
}

// ExecutionStarted opens an execution's attach stream.
func (l *Ledger) ExecutionStarted(ref engine.RunRef, execution string) {
	b := l.b
	b.startExecutionKey(ref.Tenant, execution)
	b.attach(ref.Tenant, execution, protocol.AttachEvent{Type: "working"})
}

// ExecutionEnded closes an execution's attach stream.
func (l *Ledger) ExecutionEnded(ref engine.RunRef, execution string) {
	b := l.b
	b.attach(ref.Tenant, execution, protocol.AttachEvent{Type: "settled"})
	b.endExecutionKey(ref.Tenant, execution)
}

func (b *Backend) attach(tenantKey, execution string, ev protocol.AttachEvent) {
	if rest, err := attachRest(ev); err == nil {
		_ = b.publishAttachKey(tenantKey, execution, rest)
	}
}

var _ engine.Ledger = (*Ledger)(nil)

// Ledger is the Backend seen as the engine's ledger, for one supervising
// process (owner).
type Ledger struct {
	b     *Backend
	owner string

	mu     sync.Mutex
	epochs map[engine.RunRef]uint64 // claimed runs and the lease epoch held
}

// Ledger returns the engine.Ledger view of b for the supervising process
// owner (an id unique to this process lifetime). Build the backend with
// Config.Engine set when an engine drives it.
func (b *Backend) Ledger(owner string) *Ledger {
	return &Ledger{b: b, owner: owner, epochs: map[engine.RunRef]uint64{}}
}

// Claim takes the run's supervision lease when the store keeps leases
// (store.Leaser); writes for the run are then fenced by its epoch.
func (l *Ledger) Claim(ctx context.Context, ref engine.RunRef) error {
	lr, ok := l.b.store.(store.Leaser)
	if !ok {
		return nil
	}
	epoch, err := lr.AcquireLease(ctx, store.RunLease(ref.Tenant, ref.RunID), l.owner)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.epochs[ref] = epoch
	l.mu.Unlock()
	return nil
}

// fence checks, inside tx, that this process still holds the run's lease.
func (l *Ledger) fence(tx store.ReadTx, ref engine.RunRef) error {
	l.mu.Lock()
	epoch, claimed := l.epochs[ref]
	l.mu.Unlock()
	if !claimed {
		if _, ok := l.b.store.(store.Leaser); ok {
			return fmt.Errorf("%w: run %s is not claimed", engine.ErrStale, ref.RunID)
		}
		return nil
	}
	if err := store.CheckLease(tx, store.RunLease(ref.Tenant, ref.RunID), epoch); err != nil {
		return fmt.Errorf("%w: %v", engine.ErrStale, err)
	}
	return nil
}
