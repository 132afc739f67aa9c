package reduce

import (
	"encoding/json"
	"math"

	"github.com/oecp/oecp/graph"
)

// MaxIdentity bounds node-instance and execution ids (2^53-1, so ids stay
// exact in every JSON reader).
const MaxIdentity = graph.MaxSafeInteger

// MaxPosition bounds history positions (ledger sequence numbers).
const MaxPosition = math.MaxInt64

// Occurrence is the structural identity of an executable visit site: the
// node name plus the index of every enclosing map item, outermost first.
// Loop iterations of one occurrence are distinct visits of it.
type Occurrence struct {
	Node       string   `json:"node"`
	MapIndices []uint64 `json:"mapIndices"`
}

// ExecutionState is the lifecycle state of a recorded execution.
type ExecutionState string

// Execution states.
const (
	StateActive  ExecutionState = "active"
	StateSettled ExecutionState = "settled"
	StateVoided  ExecutionState = "voided"
	// StateInterrupted: the execution was cancelled by a graceful
	// shutdown of its supervisor before it ended. It neither failed nor
	// succeeded: the fold ignores it, except that its execution id stays
	// taken and its node instance stays its occurrence's, so the same
	// attempt is dispatched again as a fresh execution.
	StateInterrupted ExecutionState = "interrupted"
)

// VoidReason says why an execution was voided.
type VoidReason string

// Void reasons.
const (
	VoidParallelJoin VoidReason = "parallel_join"
	VoidMapTerminal  VoidReason = "map_terminal"
)

// OutcomeStatus tags a WorkerOutcome.
type OutcomeStatus string

// Outcome statuses.
const (
	OutcomeVerified OutcomeStatus = "verified" // step success
	OutcomeVerifier OutcomeStatus = "verifier" // verifier success
	OutcomeError    OutcomeStatus = "error"    // failed execution
)

// Outcome is a settled WorkerOutcome. Which fields matter
// depends on Status: verified → Output, Artifacts; verifier → Output,
// Signals, Diagnostic, Artifacts; error → Code (timeout|crash|malformed|
// refusal) and Reason. Artifacts never influence the reducer.
type Outcome struct {
	Status     OutcomeStatus
	Output     json.RawMessage
	Signals    map[string]string
	Diagnostic json.RawMessage
	Artifacts  []graph.ArtifactRef
	Code       string
	Reason     string
}

// Execution is one recorded dispatch (a `node_started` event) and what became
// of it.
type Execution struct {
	// DispatchPosition is the ledger position of node_started (≥ 1).
	DispatchPosition uint64
	// NodeInstance is stable for an occurrence across all its executions.
	NodeInstance uint64
	// Execution is unique per dispatch.
	Execution  uint64
	Occurrence Occurrence
	// Attempt numbers the executions of one visit: 1 for the first
	// dispatch of a visit, n+1 for the re-dispatch after attempt n failed.
	Attempt uint64
	// Input is exactly what was dispatched.
	Input json.RawMessage
	State ExecutionState
	// Position is the ledger position of node_completed (settled),
	// execution_voided (voided) or of the interruption record
	// (interrupted); unused when active.
	Position uint64
	// Outcome is set when settled.
	Outcome *Outcome
	// VoidReason is set when voided.
	VoidReason VoidReason
}

// RetryGrant records an operator `retry` of a held run: the visit that
// Execution belongs to gets one attempt more than its node's `attempts`.
// Grants naming the same execution are one grant (a retry is idempotent).
type RetryGrant struct {
	Execution uint64
}

// History is everything the reducer reads besides the graph and the initial
// input. Order does not matter; the reducer sorts what it needs.
type History struct {
	Executions []Execution
	// Ended are more executions, every one ended (none active), kept
	// apart so that a caller can share one slice, only ever appended to,
	// between the reductions of a run: a reduction never changes it, and
	// one with a memo takes the part of it that it indexed before, in the
	// same slice, as unchanged.
	Ended  []Execution
	Grants []RetryGrant
}

// size is the number of executions of h.
func (h *History) size() int { return len(h.Ended) + len(h.Executions) }

// at is execution i of h: Ended, then Executions.
func (h *History) at(i int) *Execution {
	if i < len(h.Ended) {
		return &h.Ended[i]
	}
	return &h.Executions[i-len(h.Ended)]
}

// DecisionKind tags a Decision.
type DecisionKind string

// Decision kinds. The supervisor acts on void_loser (first), terminal,
// dispatch and hold; continue and promote only trace the evaluation and
// may be ignored.
const (
	DecisionDispatch  DecisionKind = "dispatch"
	DecisionVoidLoser DecisionKind = "void_loser"
	DecisionHold      DecisionKind = "hold"
	DecisionContinue  DecisionKind = "continue"
	DecisionPromote   DecisionKind = "promote"
	DecisionTerminal  DecisionKind = "terminal"
)

// Dispatch asks the supervisor to start an execution (write-ahead a
// node_started event with these fields, then run the worker).
type Dispatch struct {
	NodeInstance uint64
	Execution    uint64
	Occurrence   Occurrence
	Attempt      uint64
	Kind         graph.NodeKind // step or verifier
	Worker       string
	Input        json.RawMessage // canonical bytes
	TimeoutMs    uint64
}

// VoidLoser asks the supervisor to cancel an active execution that lost a
// par join or sits in another item of a terminated map, and to record it
// voided with Reason.
type VoidLoser struct {
	Execution uint64
	Reason    VoidReason
}

// Hold reports a visit whose last attempt failed with its budget used up
// and whose error no guard routes: the path waits for a retry grant naming
// Execution. Nothing else is dispatched on that path.
type Hold struct {
	Execution    uint64
	NodeInstance uint64
	Occurrence   Occurrence
	Attempt      uint64
	Code         string
}

// Promoted is one state write reported by a promote decision.
type Promoted struct {
	Path  graph.FieldPath
	Value json.RawMessage
}

// Promote reports the state writes of an executable or a group promotion.
type Promote struct {
	Node       string
	MapIndices []uint64
	Values     []Promoted
}

// TerminalStatus is the run's terminal status.
type TerminalStatus string

// Terminal statuses.
const (
	TerminalSucceeded TerminalStatus = "succeeded"
	TerminalFailed    TerminalStatus = "failed"
)

// Terminal is the run's result projection: succeeded with Output, or failed
// with Reason.
type Terminal struct {
	Status TerminalStatus
	Output json.RawMessage // canonical bytes; succeeded only
	Reason string          // failed only
}

// Decision is one reducer decision; exactly the field matching Kind is set
// (Continue names the node).
type Decision struct {
	Kind      DecisionKind
	Dispatch  *Dispatch
	VoidLoser *VoidLoser
	Hold      *Hold
	Continue  string
	Promote   *Promote
	Terminal  *Terminal
}

// Result is one reduction: the decisions in evaluation order (void_loser
// entries deduplicated and sorted among their own slots, terminal last) and
// the terminal, if the root reached one.
type Result struct {
	Decisions []Decision
	Terminal  *Terminal
}

// Dispatches returns the dispatch decisions in order.
func (r Result) Dispatches() []Dispatch {
	return decisionsOf(r, DecisionDispatch, func(d Decision) *Dispatch { return d.Dispatch })
}

// Voids returns the void_loser decisions in order.
func (r Result) Voids() []VoidLoser {
	return decisionsOf(r, DecisionVoidLoser, func(d Decision) *VoidLoser { return d.VoidLoser })
}

// Holds returns the hold decisions in order.
func (r Result) Holds() []Hold {
	return decisionsOf(r, DecisionHold, func(d Decision) *Hold { return d.Hold })
}

// decisionsOf returns the payloads of r's decisions of one kind, in order.
func decisionsOf[T any](r Result, kind DecisionKind, payload func(Decision) *T) []T {
	var out []T
	for _, d := range r.Decisions {
		if d.Kind == kind {
			out = append(out, *payload(d))
		}
	}
	return out
}

func occJSON(o Occurrence) map[string]any {
	idx := o.MapIndices
	if idx == nil {
		idx = []uint64{}
	}
	return map[string]any{"node": o.Node, "mapIndices": idx}
}

func rawOrNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

// setExecution sets the fields naming one execution of a dispatch or hold.
func setExecution(m map[string]any, execution, nodeInstance uint64, o Occurrence, attempt uint64) {
	m["execution"] = execution
	m["node_instance"] = nodeInstance
	m["occurrence"] = occJSON(o)
	m["attempt"] = attempt
}

// MarshalJSON writes the decision as canonical JSON (keys sorted), with
// snake_case fields and `occurrence` as {node, mapIndices}.
func (d Decision) MarshalJSON() ([]byte, error) {
	m := map[string]any{"kind": string(d.Kind)}
	switch d.Kind {
	case DecisionDispatch:
		x := d.Dispatch
		setExecution(m, x.Execution, x.NodeInstance, x.Occurrence, x.Attempt)
		m["worker"] = x.Worker
		m["input"] = rawOrNull(x.Input)
		m["timeout_ms"] = x.TimeoutMs
	case DecisionVoidLoser:
		m["execution"] = d.VoidLoser.Execution
		m["reason"] = string(d.VoidLoser.Reason)
	case DecisionHold:
		x := d.Hold
		setExecution(m, x.Execution, x.NodeInstance, x.Occurrence, x.Attempt)
		m["code"] = x.Code
	case DecisionContinue:
		m["node"] = d.Continue
	case DecisionPromote:
		x := d.Promote
		idx := x.MapIndices
		if idx == nil {
			idx = []uint64{}
		}
		vals := make([]any, 0, len(x.Values))
		for _, v := range x.Values {
			vals = append(vals, map[string]any{"path": []string(v.Path), "value": rawOrNull(v.Value)})
		}
		m["node"] = x.Node
		m["map_indices"] = idx
		m["values"] = vals
	case DecisionTerminal:
		m["projection"] = d.Terminal.projection()
	}
	return canonical(m)
}

func (t *Terminal) projection() map[string]any {
	if t.Status == TerminalSucceeded {
		return map[string]any{"status": string(t.Status), "output": rawOrNull(t.Output)}
	}
	return map[string]any{"status": string(t.Status), "reason": t.Reason}
}

// MarshalJSON writes the projection {status, output} or {status, reason}.
func (t Terminal) MarshalJSON() ([]byte, error) { return canonical(t.projection()) }
