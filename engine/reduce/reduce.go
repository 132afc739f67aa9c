package reduce

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"sort"

	"github.com/oecp/oecp/graph"
)

// Reduce folds the recorded history of a run over its verified graph and
// returns what should happen next. It is pure and deterministic: no I/O, no
// clock, and the order of h's slices does not matter.
//
// A returned error wraps one of the Err* sentinels; the supervisor should
// terminalise the run as failed with FailureReason(err).
func Reduce(g *graph.GraphSpec, initialInput json.RawMessage, h History) (Result, error) {
	return reduce(g, initialInput, h, false, nil)
}

func reduce(g *graph.GraphSpec, initialInput json.RawMessage, h History, native bool, m *Memo) (Result, error) {
	ix, err := indexGraph(g)
	if err != nil {
		return Result{}, err
	}
	m.begin(g, initialInput, h)
	hi, err := indexHistory(ix, h, m)
	if err != nil {
		if m != nil {
			return withoutTraces(reduce(g, initialInput, h, native, nil))
		}
		return Result{}, err
	}
	state, err := parseValue(initialInput)
	if err != nil {
		return Result{}, err
	}
	e := &evaluator{ix: ix, h: hi, consumed: map[uint64]bool{}, claims: map[uint64]claim{}, native: native,
		memo: m, clean: true, loopVisits: map[string]int{}}
	r, err := e.eval(g.Root, newCtx(state), pass{decide: true, cutoff: inf})
	if err != nil && m == nil {
		return Result{}, err
	}
	if m != nil && (err != nil || (e.covered > 0 && !e.allVisited())) {
		// Reduced again without the memo, an error names its cause.
		return withoutTraces(reduce(g, initialInput, h, native, nil))
	}
	if r.st == stContinue {
		return Result{}, errf(ErrRootCompleted, "root %q finished without a terminal", g.Root.NodeName())
	}
	if e.covered == 0 {
		err := hi.each(func(id uint64, x *entry) error {
			if !e.consumed[id] && x.State != StateInterrupted {
				return errf(ErrInconsistentHistory, "execution %d (%s) is never visited", id, x.Occurrence.Node)
			}
			return nil
		})
		if err != nil {
			return Result{}, err
		}
	}
	for _, id := range hi.voided {
		x, _ := hi.entry(id)
		c, ok := e.claims[id]
		if !ok || c.reason != x.VoidReason || x.Position <= c.cutoff {
			return Result{}, errf(ErrInconsistentHistory, "voided execution %d is not claimed by a join or map terminal", id)
		}
	}
	out := Result{Decisions: e.sortVoids()}
	if r.st == stTerminal {
		out.Terminal = r.term
		out.Decisions = append(out.Decisions, Decision{Kind: DecisionTerminal, Terminal: r.term})
	}
	return out, nil
}

const inf = math.MaxUint64

type pass struct {
	decide bool
	cutoff uint64
}

// dispatches reports whether this pass may start work: decide mode with no
// cutoff (a pass replaying history up to a join or terminal position only
// re-derives what happened then).
func (p pass) dispatches() bool { return p.decide && p.cutoff == inf }

type status int

const (
	stPending status = iota
	stContinue
	stTerminal
)

type res struct {
	st   status
	pos  uint64
	term *Terminal
}

var pending = res{st: stPending, pos: inf}

type claim struct {
	cutoff uint64
	reason VoidReason
}

type evaluator struct {
	ix        *graphIndex
	h         *historyIndex
	decisions []Decision
	consumed  map[uint64]bool
	claims    map[uint64]claim
	native    bool // ReduceNative
	memo      *Memo
	// clean: so far the evaluation met nothing that a later history could
	// change (see loopPoint); loopVisits counts the visits of each loop
	// occurrence; covered is the number of executions consumed before the
	// loop point the evaluation resumed from (they are not in consumed).
	clean      bool
	loopVisits map[string]int
	covered    int
}

// emit records decision d. A reduction with a memo reports no trace
// decisions (continue, promote).
func (e *evaluator) emit(d Decision) {
	if d.Kind == DecisionContinue || d.Kind == DecisionPromote {
		if e.memo != nil {
			return
		}
	} else {
		e.clean = false
	}
	e.decisions = append(e.decisions, d)
}

func (e *evaluator) emitContinue(p pass, node string) {
	if p.decide {
		e.emit(Decision{Kind: DecisionContinue, Continue: node})
	}
}

// sortVoids deduplicates void_loser decisions by execution and sorts them
// among their own slots by (dispatch position, execution id).
func (e *evaluator) sortVoids() []Decision {
	seen := map[uint64]bool{}
	var out []Decision
	var slots []int
	var voids []*VoidLoser
	for _, d := range e.decisions {
		if d.Kind == DecisionVoidLoser {
			if seen[d.VoidLoser.Execution] {
				continue
			}
			seen[d.VoidLoser.Execution] = true
			slots = append(slots, len(out))
			voids = append(voids, d.VoidLoser)
		}
		out = append(out, d)
	}
	sort.SliceStable(voids, func(i, j int) bool {
		a, _ := e.h.entry(voids[i].Execution)
		b, _ := e.h.entry(voids[j].Execution)
		return cmp.Or(cmp.Compare(a.DispatchPosition, b.DispatchPosition), cmp.Compare(a.Execution.Execution, b.Execution.Execution)) < 0
	})
	for i, s := range slots {
		out[s] = Decision{Kind: DecisionVoidLoser, VoidLoser: voids[i]}
	}
	return out
}

func (e *evaluator) eval(n graph.Node, c *ctx, p pass) (res, error) {
	r, err := e.evalNode(n, c, p)
	if r.st == stPending {
		e.clean = false
	}
	return r, err
}

func (e *evaluator) evalNode(n graph.Node, c *ctx, p pass) (res, error) {
	switch t := n.(type) {
	case *graph.Step:
		return e.evalExec(execNode{t.Name, graph.KindStep, t.Worker, t.TimeoutMs, t.Attempts, t.InputBindings, t.WriteBindings, nil}, c, p)
	case *graph.Verifier:
		return e.evalExec(execNode{t.Name, graph.KindVerifier, t.Worker, t.TimeoutMs, t.Attempts, t.InputBindings, t.WriteBindings, t.Signals}, c, p)
	case *graph.Seq:
		return e.evalSeq(t, c, p)
	case *graph.Choice:
		return e.evalChoice(t, c, p)
	case *graph.Par:
		return e.evalPar(t, c, p)
	case *graph.Loop:
		return e.evalLoop(t, c, p)
	case *graph.Map:
		return e.evalMap(t, c, p)
	case *graph.Succeed:
		b, err := c.canonicalInput(t.Bindings)
		if err != nil {
			return res{}, err
		}
		return res{st: stTerminal, term: &Terminal{Status: TerminalSucceeded, Output: b}}, nil
	case *graph.Fail:
		return res{st: stTerminal, term: &Terminal{Status: TerminalFailed, Reason: t.Reason}}, nil
	}
	return res{}, errf(ErrInvalidGraph, "unknown node %T", n)
}

// claimLosers claims the unsettled executions consumed so far under subtree
// (restricted to map indices under scope and outside exclude) for a join or
// map terminal at cutoff, emitting void_loser for the active ones in decide
// mode. An execution keeps the earliest cutoff that claims it; Reduce then
// requires every voided execution to be claimed, with its recorded reason,
// at a cutoff before its void position.
func (e *evaluator) claimLosers(subtree map[string]bool, scope, exclude []uint64, cutoff uint64, reason VoidReason, p pass) {
	e.clean = false
	ids := make([]uint64, 0, len(e.consumed))
	for id := range e.consumed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		x, _ := e.h.entry(id)
		if !subtree[x.Occurrence.Node] || !hasPrefix(x.Occurrence.MapIndices, scope) || x.State == StateSettled {
			continue
		}
		if exclude != nil && hasPrefix(x.Occurrence.MapIndices, exclude) {
			continue
		}
		if old, ok := e.claims[id]; !ok || cutoff < old.cutoff {
			e.claims[id] = claim{cutoff: cutoff, reason: reason}
		}
		if x.State == StateActive && p.decide {
			e.emit(Decision{Kind: DecisionVoidLoser, VoidLoser: &VoidLoser{Execution: id, Reason: reason}})
		}
	}
}
