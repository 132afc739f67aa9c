package reduce

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/oecp/oecp/graph"
)

// ErrHeld is returned by Simulate when the run holds: a failed execution
// waits for a retry grant and nothing else can progress.
var ErrHeld = errors.New("reduce: run is held waiting for a retry")

// ErrNoProgress is returned by Simulate when the reducer neither dispatches,
// voids, holds nor terminates while nothing is in flight, or when the run
// exceeds maxSimulationTurns.
var ErrNoProgress = errors.New("reduce: run makes no progress")

// maxSimulationTurns bounds Simulate: every turn appends at least one event
// and a verified run has at most MaxExecutionsPerRun×MaxAttempts executions,
// each started, settled or voided once.
const maxSimulationTurns = 4 * graph.MaxExecutionsPerRun

// Worker answers a dispatch with its outcome (a test double of the real
// worker runtime).
type Worker func(Dispatch) Outcome

// Simulate drives a run to its end the way the supervisor does: void
// losers first, then the terminal, then dispatch everything ready
// (write-ahead), else settle the oldest in-flight execution with worker. Positions are 1, 2, … in that order (the run's start is
// position 0). It returns the terminal and the full history; when the run
// holds it returns ErrHeld with the history so far (add a RetryGrant and
// call SimulateFrom to continue).
func Simulate(g *graph.GraphSpec, input json.RawMessage, worker Worker) (*Terminal, History, error) {
	return SimulateFrom(g, input, History{}, worker)
}

// SimulateFrom is Simulate continuing from a recorded history.
func SimulateFrom(g *graph.GraphSpec, input json.RawMessage, h History, worker Worker) (*Terminal, History, error) {
	return drive(g, input, h, worker, func(active []int) int { return active[0] })
}

// memoOnly makes drive reduce every turn with its memo only, not also
// without it (for benchmarks: a reduction without a memo costs what the
// history so far costs).
var memoOnly bool

// drive is Simulate with a choice of which in-flight execution settles next
// (pick gets the indexes of active executions in dispatch order).
func drive(g *graph.GraphSpec, input json.RawMessage, h History, worker Worker, pick func(active []int) int) (*Terminal, History, error) {
	h.Executions = slices.Clone(h.Executions)
	h.Grants = slices.Clone(h.Grants)
	var pos uint64
	for _, x := range h.Executions {
		pos = max(pos, x.DispatchPosition, x.Position)
	}
	memo := &Memo{} // every turn is reduced with and without it, alike
	for range maxSimulationTurns {
		r, err := ReduceWith(g, input, h, memo)
		if !memoOnly {
			r, err = Reduce(g, input, h)
			if err := sameReduction(r, err, memo, g, input, h); err != nil {
				return nil, h, err
			}
		}
		if err != nil {
			return nil, h, err
		}
		byID := map[uint64]int{}
		var active []int
		for i, x := range h.Executions {
			byID[x.Execution] = i
			if x.State == StateActive {
				active = append(active, i)
			}
		}
		slices.SortFunc(active, func(a, b int) int {
			return cmp.Compare(h.Executions[a].DispatchPosition, h.Executions[b].DispatchPosition)
		})
		if vs := r.Voids(); len(vs) > 0 {
			for _, v := range vs {
				pos++
				x := &h.Executions[byID[v.Execution]]
				x.State, x.Position, x.VoidReason = StateVoided, pos, v.Reason
			}
			continue
		}
		if r.Terminal != nil {
			if len(active) > 0 {
				return nil, h, ErrNoProgress
			}
			return r.Terminal, h, nil
		}
		if ds := r.Dispatches(); len(ds) > 0 {
			for _, d := range ds {
				pos++
				h.Executions = append(h.Executions, Execution{
					DispatchPosition: pos, NodeInstance: d.NodeInstance, Execution: d.Execution,
					Occurrence: d.Occurrence, Attempt: d.Attempt, Input: d.Input, State: StateActive,
				})
			}
			continue
		}
		if len(active) == 0 {
			if len(r.Holds()) > 0 {
				return nil, h, ErrHeld
			}
			return nil, h, ErrNoProgress
		}
		i := pick(active)
		x := &h.Executions[i]
		kind := graph.KindStep
		n, ok := findNode(g, x.Occurrence.Node)
		if ok {
			kind = n.NodeKind()
		}
		w, timeout := execFields(n)
		o := worker(Dispatch{
			NodeInstance: x.NodeInstance, Execution: x.Execution, Occurrence: x.Occurrence,
			Attempt: x.Attempt, Kind: kind, Worker: w, Input: x.Input, TimeoutMs: timeout,
		})
		pos++
		x.State, x.Position, x.Outcome = StateSettled, pos, &o
	}
	return nil, h, ErrNoProgress
}

func findNode(g *graph.GraphSpec, name string) (graph.Node, bool) {
	var found graph.Node
	graph.Walk(g, func(n graph.Node, _ graph.Path, _ int) bool {
		if found == nil && n.NodeName() == name {
			found = n
		}
		return found == nil
	})
	return found, found != nil
}

// execFields returns the worker and timeout of an executable node (zero
// values for other nodes).
func execFields(n graph.Node) (worker string, timeoutMs uint64) {
	switch t := n.(type) {
	case *graph.Step:
		return t.Worker, t.TimeoutMs
	case *graph.Verifier:
		return t.Worker, t.TimeoutMs
	}
	return "", 0
}

// sameReduction checks that ReduceWith with memo returns r and err, what
// Reduce returned for the same arguments, less the trace decisions.
func sameReduction(r Result, err error, memo *Memo, g *graph.GraphSpec, input json.RawMessage, h History) error {
	rm, errm := ReduceWith(g, input, h, memo)
	if fmt.Sprint(err) != fmt.Sprint(errm) {
		return fmt.Errorf("with a memo: error %v, without: %v", errm, err)
	}
	a, _ := json.Marshal(append([]Decision{}, slices.DeleteFunc(slices.Clone(r.Decisions), func(d Decision) bool {
		return d.Kind == DecisionContinue || d.Kind == DecisionPromote
	})...))
	b, _ := json.Marshal(append([]Decision{}, rm.Decisions...))
	if string(a) != string(b) || (r.Terminal == nil) != (rm.Terminal == nil) {
		return fmt.Errorf("with a memo: decisions %s, without: %s", b, a)
	}
	return nil
}
