package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// This file is the engine-facing lifecycle API: what the execution engine
// calls while it drives the current run, and what tests use as hooks to
// replay the hook-dependent goldens. None of it is reachable over the wire.
//
// The contract, per call (each call is one store transaction):
//
//	Dispatch   acquire a dispatch lease for a turn; records node_begin
//	           (or a bookmark for a turn without a node). Denied unless the
//	           run is running with dispatch active (suspension and stop
//	           gate new dispatch).
//	Complete   settle a lease with a verified (or verifier) outcome;
//	           records node_end. History becomes "success".
//	Fail       settle a lease with an error outcome; records node_end.
//	           retryable: the turn becomes the failed frontier that retry
//	           targets; otherwise history becomes "exhausted".
//	(void)     stop{force} voids every lease (one bookmark each) and
//	           closes Lease.Done; a later Complete/Fail is rejected with
//	           ErrLeaseVoided (CANCELLED on the wire).
//	           A drain stop finishes the run when the last lease settles.
//	RecordFault  append a descriptive fault event to the current run.
//	HoldCleanup / ConfirmCleanup  make delete hold the deleting phase
//	           until the backend confirms runtime cleanup.
//	PublishLog / StartExecution / PublishAttach / EndExecution  feed the
//	           live, cursorless logs and agent/attach subscriptions.
//
// Errors a caller branches on are the sentinels below (wrapped), or a
// *protocol.Error for the same conditions the wire reports.

// Sentinel errors of the engine API.
var (
	// ErrNoRun: the cluster has no running run (or not the given one).
	ErrNoRun = errors.New("cluster: no such running run")
	// ErrDispatchDenied: the lifecycle gate denies new dispatch
	// (suspended, draining, force stopping or stopped).
	ErrDispatchDenied = errors.New("cluster: lifecycle state denies dispatch")
	// ErrUnknownLease: no such lease in the current run.
	ErrUnknownLease = errors.New("cluster: unknown lease")
	// ErrLeaseVoided: the lease was voided by a force stop or its run
	// finished; the settlement is rejected and nothing is recorded.
	ErrLeaseVoided = errors.New("cluster: lease was voided")
	// ErrInvalid: the call's arguments break a protocol bound.
	ErrInvalid = errors.New("cluster: invalid engine call")
)

// Turn is one worker turn the engine wants to dispatch.
type Turn struct {
	// RunID, when set, must be the current run (a guard against a stale
	// engine driving a superseded run).
	RunID string
	// TurnID is the engine's turn id; the retry turn id reserved by retry
	// is consumed when a turn with that id is dispatched.
	TurnID string
	// Node and Attempt address the execution in node events; with Node
	// empty the dispatch is recorded as a bookmark instead of node_begin.
	Node    string
	Attempt int64
	// Input is the node's bound input, echoed in node_begin.
	Input protocol.Value
	// Execution optionally names the execution for agent/attach.
	Execution string
	// ErrorSuccessor marks a dispatch taken by graph error routing after
	// a failure: it consumes the pending failed frontier (retry then
	// answers NO_RETRYABLE_FRONTIER consumed).
	ErrorSuccessor bool
}

// Lease is an acquired dispatch.
type Lease struct {
	ID     string
	RunID  string
	TurnID string
	// Cursor is the cursor of the dispatch record.
	Cursor string
	// Done is closed when the lease is settled or voided (stop force). It
	// is an in-process signal; the store is authoritative (a settlement of
	// a voided lease fails with ErrLeaseVoided).
	Done <-chan struct{}
}

// Outcome is a WorkerOutcome (§7), already encoded in wire order.
type Outcome struct {
	status string
	raw    json.RawMessage
}

// VerifiedOutcome is {"status":"verified","output":...,"artifacts":[...]}.
func VerifiedOutcome(output protocol.Value, artifacts ...graph.ArtifactRef) Outcome {
	type wire struct {
		Status    string              `json:"status"`
		Output    protocol.Value      `json:"output"`
		Artifacts []graph.ArtifactRef `json:"artifacts"`
	}
	if artifacts == nil {
		artifacts = []graph.ArtifactRef{}
	}
	raw, _ := protocol.Marshal(wire{"verified", nullIfEmpty(output), artifacts})
	return Outcome{status: "verified", raw: raw}
}

// VerifierOutcome is a verifier node's outcome with its signals and
// diagnostic.
func VerifierOutcome(output protocol.Value, signals map[string]string, diagnostic protocol.Value, artifacts ...graph.ArtifactRef) Outcome {
	type wire struct {
		Status     string              `json:"status"`
		Output     protocol.Value      `json:"output"`
		Signals    map[string]string   `json:"signals"`
		Diagnostic protocol.Value      `json:"diagnostic"`
		Artifacts  []graph.ArtifactRef `json:"artifacts"`
	}
	if artifacts == nil {
		artifacts = []graph.ArtifactRef{}
	}
	if signals == nil {
		signals = map[string]string{}
	}
	raw, _ := protocol.Marshal(wire{"verifier", nullIfEmpty(output), signals, nullIfEmpty(diagnostic), artifacts})
	return Outcome{status: "verifier", raw: raw}
}

// ErrorOutcome is {"status":"error","code":...,"reason":...}; code is
// timeout|crash|malformed|refusal and reason one of the legal pairs (§7).
func ErrorOutcome(code, reason string) Outcome {
	raw, _ := protocol.Marshal(struct {
		Status string `json:"status"`
		Code   string `json:"code"`
		Reason string `json:"reason"`
	}{"error", code, reason})
	return Outcome{status: "error", raw: raw}
}

func nullIfEmpty(v protocol.Value) protocol.Value {
	if len(v) == 0 {
		return protocol.Null
	}
	return v
}

func validErrorPair(code, reason string) bool {
	switch code {
	case "timeout", "crash", "malformed", "refusal":
	default:
		return false
	}
	switch reason {
	case "declared_failure":
		return true
	case "policy_denied", "interactive_input_required", "authentication_required":
		return code == "refusal"
	case "malformed_result":
		return code == "malformed"
	}
	return false
}

// engineUpdate runs fn on the tenant's state in one transaction and saves
// it.
func (b *Backend) engineUpdate(ctx context.Context, tenant string, fn func(tx store.Tx, st *state) error) error {
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

func leaseKey(tenant, id string) string { return tenant + "\x00" + id }

// settleLease closes the in-process Done signal of a lease.
func (b *Backend) settleLease(tenant, id string) {
	b.leaseMu.Lock()
	defer b.leaseMu.Unlock()
	if ch, ok := b.leaseDone[leaseKey(tenant, id)]; ok {
		close(ch)
		delete(b.leaseDone, leaseKey(tenant, id))
	}
}

// Dispatch acquires a dispatch lease and records it (node_begin when the
// turn names a node, else a bookmark).
func (b *Backend) Dispatch(ctx context.Context, tenant string, t Turn) (Lease, error) {
	key := b.TenantKey(tenant)
	if t.TurnID == "" {
		return Lease{}, fmt.Errorf("%w: empty turn id", ErrInvalid)
	}
	if t.Node != "" && (!graph.IsIdentifier(t.Node) || t.Attempt < 1) {
		return Lease{}, fmt.Errorf("%w: node %q attempt %d", ErrInvalid, t.Node, t.Attempt)
	}
	if t.Execution != "" {
		if err := protocol.ValidExecutionRef(t.Execution); err != nil {
			return Lease{}, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	var l Lease
	err := b.engineUpdate(ctx, key, func(tx store.Tx, st *state) error {
		if st.Phase != protocol.PhaseRunning || (t.RunID != "" && t.RunID != st.RunID) {
			return ErrNoRun
		}
		if st.Op.Dispatch != protocol.DispatchActive {
			return fmt.Errorf("%w: %s", ErrDispatchDenied, st.Op.Dispatch)
		}
		n, err := tx.NextCounter(counterLease)
		if err != nil {
			return err
		}
		ls := lease{ID: leaseString(n), TurnID: t.TurnID, Node: t.Node, Attempt: t.Attempt, Execution: t.Execution, Input: nullIfEmpty(t.Input)}
		st.Leases = append(st.Leases, ls)
		st.Turns = append(st.Turns, t.TurnID)
		if t.TurnID == st.PendingRetry {
			st.PendingRetry = ""
		}
		if t.ErrorSuccessor && st.Frontier != "" {
			st.Frontier = ""
			st.History = reasonConsumed
		}
		if err := appendRecord(tx, key, st, func(*state) protocol.WatchEvent {
			if ls.Node == "" {
				return protocol.WatchEvent{Type: protocol.EventBookmark}
			}
			in := ls.Input
			return protocol.WatchEvent{Type: protocol.EventNodeBegin, Node: &protocol.NodeRef{Node: ls.Node, Attempt: ls.Attempt}, Input: &in}
		}); err != nil {
			return err
		}
		l = Lease{ID: ls.ID, RunID: st.RunID, TurnID: ls.TurnID, Cursor: cursorString(st.Cursor)}
		return nil
	})
	if err != nil {
		return Lease{}, err
	}
	done := make(chan struct{})
	b.leaseMu.Lock()
	b.leaseDone[leaseKey(key, l.ID)] = done
	b.leaseMu.Unlock()
	// A force stop may have voided the lease between commit and here.
	var active bool
	_ = b.store.View(ctx, func(tx store.ReadTx) error {
		st, _, err := load(tx, key)
		if err == nil {
			_, active = st.lease(l.ID)
		}
		return err
	})
	if !active {
		b.settleLease(key, l.ID)
	}
	l.Done = done
	return l, nil
}

// Complete settles a lease with a verified or verifier outcome.
func (b *Backend) Complete(ctx context.Context, tenant, leaseID string, o Outcome) error {
	if o.status != "verified" && o.status != "verifier" {
		return fmt.Errorf("%w: Complete needs a verified or verifier outcome", ErrInvalid)
	}
	return b.settle(ctx, tenant, leaseID, o, func(st *state, _ lease) {
		st.History = reasonSuccess
		st.Frontier = ""
	})
}

// Fail settles a lease with an error outcome. A retryable failure becomes
// the failed frontier retry targets; otherwise attempts are exhausted.
func (b *Backend) Fail(ctx context.Context, tenant, leaseID string, o Outcome, retryable bool) error {
	if o.status != "error" {
		return fmt.Errorf("%w: Fail needs an error outcome", ErrInvalid)
	}
	var pair struct{ Code, Reason string }
	_ = json.Unmarshal(o.raw, &pair)
	if !validErrorPair(pair.Code, pair.Reason) {
		return fmt.Errorf("%w: illegal error outcome %s/%s", ErrInvalid, pair.Code, pair.Reason)
	}
	return b.settle(ctx, tenant, leaseID, o, func(st *state, l lease) {
		if retryable {
			st.Frontier = l.TurnID
		} else {
			st.Frontier = ""
			st.History = reasonExhausted
		}
	})
}

func (b *Backend) settle(ctx context.Context, tenant, leaseID string, o Outcome, apply func(*state, lease)) error {
	key := b.TenantKey(tenant)
	err := b.engineUpdate(ctx, key, func(tx store.Tx, st *state) error {
		i, ok := st.lease(leaseID)
		if !ok {
			if st.Phase == protocol.PhaseFinished || st.Op.Dispatch == protocol.DispatchStopped {
				return ErrLeaseVoided
			}
			b.leaseMu.Lock()
			_, known := b.leaseDone[leaseKey(key, leaseID)]
			b.leaseMu.Unlock()
			if known {
				return ErrLeaseVoided
			}
			return ErrUnknownLease
		}
		l := st.Leases[i]
		st.Leases = append(st.Leases[:i:i], st.Leases[i+1:]...)
		apply(st, l)
		if err := appendRecord(tx, key, st, func(*state) protocol.WatchEvent {
			if l.Node == "" {
				return protocol.WatchEvent{Type: protocol.EventBookmark}
			}
			return protocol.WatchEvent{Type: protocol.EventNodeEnd, Node: &protocol.NodeRef{Node: l.Node, Attempt: l.Attempt}, Outcome: o.raw}
		}); err != nil {
			return err
		}
		if st.Op.Dispatch == protocol.DispatchDraining && len(st.Leases) == 0 {
			return finish(tx, key, st)
		}
		return nil
	})
	if err == nil || errors.Is(err, ErrLeaseVoided) {
		b.settleLease(key, leaseID)
	}
	return err
}

// Fault is a BackendFault (§8.2): descriptive only, it never authorizes a
// retry or changes terminal semantics.
type Fault struct {
	EventID      string        `json:"eventId"`
	ExecutionRef string        `json:"executionRef,omitempty"`
	Code         string        `json:"code"`
	Consequence  string        `json:"consequence"`
	Retry        string        `json:"retry"`
	Action       string        `json:"action"`
	Severity     string        `json:"severity"`
	Summary      string        `json:"summary"`
	Source       []FaultSource `json:"source"`
}

// FaultSource is one frame of a fault's source.
type FaultSource struct {
	Component string `json:"component"`
}

func oneOf(v string, set ...string) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}

// encode validates the fault's bounds and enums and encodes it.
func (f Fault) encode() (json.RawMessage, error) {
	bad := func(what string) error { return fmt.Errorf("%w: fault %s", ErrInvalid, what) }
	switch {
	case !graph.IsBoundedString256(f.EventID), !graph.IsBoundedString256(f.Summary):
		return nil, bad("eventId/summary must be 1..256 characters without controls")
	case f.ExecutionRef != "" && protocol.ValidExecutionRef(f.ExecutionRef) != nil:
		return nil, bad("executionRef is invalid")
	case !oneOf(f.Code, "unavailable", "resource_exhausted", "deadline_exceeded", "permission_denied", "failed_precondition", "not_found", "aborted", "internal", "unknown"):
		return nil, bad("code")
	case !oneOf(f.Consequence, "turn_failed", "run_failed", "run_degraded", "no_observable_effect"):
		return nil, bad("consequence")
	case !oneOf(f.Retry, "retryable", "retryable_after_backoff", "not_retryable", "indeterminate"):
		return nil, bad("retry")
	case !oneOf(f.Action, "none", "retry", "wait", "escalate", "abort"):
		return nil, bad("action")
	case f.Action == "retry" && f.Retry == "not_retryable":
		return nil, bad("action retry with not_retryable")
	case !oneOf(f.Severity, "info", "warning", "error", "critical"):
		return nil, bad("severity")
	case len(f.Source) > protocol.MaxFaultSourceFrames:
		return nil, bad("has too many source frames")
	}
	for _, s := range f.Source {
		if !graph.IsBoundedString256(s.Component) {
			return nil, bad("source component")
		}
	}
	if f.Source == nil {
		f.Source = []FaultSource{}
	}
	raw, err := protocol.Marshal(f)
	if err != nil {
		return nil, err
	}
	if len(raw) > protocol.MaxFaultEncodedBytes {
		return nil, bad("exceeds 2048 encoded bytes")
	}
	return raw, nil
}

// RecordFault appends a fault event to the current, unfinished run and
// returns its cursor.
func (b *Backend) RecordFault(ctx context.Context, tenant string, f Fault) (string, error) {
	raw, err := f.encode()
	if err != nil {
		return "", err
	}
	key := b.TenantKey(tenant)
	var cur string
	err = b.engineUpdate(ctx, key, func(tx store.Tx, st *state) error {
		if st.Phase != protocol.PhaseRunning {
			return ErrNoRun
		}
		if err := appendRecord(tx, key, st, func(*state) protocol.WatchEvent {
			return protocol.WatchEvent{Type: protocol.EventFault, Fault: raw}
		}); err != nil {
			return err
		}
		cur = cursorString(st.Cursor)
		return nil
	})
	return cur, err
}

// HoldCleanup makes the next delete of a finished run hold the deleting
// phase (runtime cleanup pending) until ConfirmCleanup.
func (b *Backend) HoldCleanup(ctx context.Context, tenant string) error {
	return b.engineUpdate(ctx, b.TenantKey(tenant), func(_ store.Tx, st *state) error {
		st.CleanupHeld = true
		return nil
	})
}

// ConfirmCleanup confirms runtime cleanup: a cluster held in deleting is
// finalized to empty (history tombstoned); otherwise later deletes no
// longer hold.
func (b *Backend) ConfirmCleanup(ctx context.Context, tenant string) error {
	key := b.TenantKey(tenant)
	return b.engineUpdate(ctx, key, func(tx store.Tx, st *state) error {
		st.CleanupHeld = false
		if st.Phase == protocol.PhaseDeleting {
			return finalizeDelete(tx, key, st)
		}
		return nil
	})
}
