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
	if m != nil && (err != nil || !e.covers()) {
		// Reduced again without the memo, an error names its cause.
		m.spoil(e.resumedKeys)
		return withoutTraces(reduce(g, initialInput, h, native, nil))
	}
	if r.st == stContinue {
		return Result{}, errf(ErrRootCompleted, "root %q finished without a terminal", g.Root.NodeName())
	}
	if len(e.resumedKeys) == 0 {
		if err := e.checkHistory(); err != nil {
			return Result{}, err
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
	// unsettled lists the consumed executions that are not settled, in
	// the order they were first consumed (the only ones a claim changes).
	unsettled []uint64
	// clean: so far the evaluation met nothing that a later history could
	// change (see loopPoint); dirt counts the times it met such a thing;
	// loopVisits counts the visits of each loop or map occurrence (in the
	// passes that may dispatch).
	clean      bool
	dirt       int
	loopVisits map[string]int
	resumed    cover
	// checked: unsettled[:checked] are voided and claimed as Reduce
	// requires (see keepLoopPoint); unsure: a claim may have changed what
	// the resumed loop point took as final (the memo is not used).
	checked int
	unsure  bool
	// maxCutoff and maxDispatch are the highest cutoff of a claim and
	// the highest dispatch position of a consumed execution since the
	// evaluation started or resumed; second counts the par and map passes
	// over children their probe already evaluated that enclose the node
	// evaluated.
	maxCutoff, maxDispatch uint64
	second                 int
	// logs of what the evaluation consumed, claimed and visited, read by
	// the memo's map points.
	consumeLog []uint64
	claimLog   []claimed
	visitLog   []string
	// resumedKeys are the loop visits the evaluation resumed.
	resumedKeys []string
}

// cover is what a loop point the evaluation resumed from stands for: the
// executions consumed before it (they are not in consumed), the voided
// ones among them (each claimed as Reduce requires), the highest cutoff
// of any claim made before it and the highest dispatch position of those
// executions.
type cover struct {
	consumed, voids  int
	cutoff, dispatch uint64
}

// claimed is one claim of an execution.
type claimed struct {
	id uint64
	c  claim
}

// soil records that the evaluation met something a later history could
// change.
func (e *evaluator) soil() {
	e.clean = false
	e.dirt++
}

// emit records decision d. A reduction with a memo reports no trace
// decisions (continue, promote).
func (e *evaluator) emit(d Decision) {
	if d.Kind == DecisionContinue || d.Kind == DecisionPromote {
		if e.memo != nil {
			return
		}
	} else {
		e.soil()
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
		e.soil()
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
	if cutoff < e.resumed.cutoff {
		e.unsure = true // it might lower a claim made before the loop point
	}
	ids := slices.Clone(e.unsettled)
	slices.Sort(ids)
	for _, id := range ids {
		x, _ := e.h.entry(id)
		if !subtree[x.Occurrence.Node] || !hasPrefix(x.Occurrence.MapIndices, scope) {
			continue
		}
		if exclude != nil && hasPrefix(x.Occurrence.MapIndices, exclude) {
			continue
		}
		e.claim(id, claim{cutoff: cutoff, reason: reason})
		if x.State == StateActive {
			e.soil()
			if p.decide {
				e.emit(Decision{Kind: DecisionVoidLoser, VoidLoser: &VoidLoser{Execution: id, Reason: reason}})
			}
		}
	}
}

// claim claims execution id at c, unless an earlier cutoff already does.
func (e *evaluator) claim(id uint64, c claim) {
	if old, ok := e.claims[id]; !ok || c.cutoff < old.cutoff {
		e.claims[id] = c
	}
	e.maxCutoff = max(e.maxCutoff, c.cutoff)
	if e.memo != nil {
		e.claimLog = append(e.claimLog, claimed{id, c})
	}
}

// consume marks execution x consumed by the evaluation.
func (e *evaluator) consume(x *entry) {
	id := x.Execution.Execution
	if e.memo != nil {
		e.consumeLog = append(e.consumeLog, id)
	}
	if e.consumed[id] {
		return
	}
	e.consumed[id] = true
	if x.DispatchPosition <= e.resumed.dispatch {
		e.unsure = true // it may have been consumed before the loop point
	}
	e.maxDispatch = max(e.maxDispatch, x.DispatchPosition)
	if x.State != StateSettled {
		e.unsettled = append(e.unsettled, id)
		if x.State == StateActive {
			e.soil()
		}
	}
}

// claimedOK reports whether voided execution x is claimed as Reduce
// requires: with its recorded reason, at a cutoff before its void.
func (e *evaluator) claimedOK(x *entry) bool {
	c, ok := e.claims[x.Execution.Execution]
	return ok && c.reason == x.VoidReason && x.Position > c.cutoff
}

// checkHistory checks, after a full evaluation, that every execution
// that is not interrupted was visited and that every voided one is
// claimed as its record says.
func (e *evaluator) checkHistory() error {
	// The consumed executions are all visitable (visits leave the
	// interrupted ones out).
	if len(e.consumed) != e.h.visitable {
		return e.neverVisited()
	}
	for _, id := range e.h.voided {
		x, _ := e.h.entry(id)
		if !e.claimedOK(x) {
			return errf(ErrInconsistentHistory, "voided execution %d is not claimed by a join or map terminal", id)
		}
	}
	return nil
}

// neverVisited names the lowest id of an execution that is not
// interrupted and was never visited.
func (e *evaluator) neverVisited() error {
	var first *entry
	_ = e.h.each(func(id uint64, x *entry) error {
		if !e.consumed[id] && x.State != StateInterrupted && (first == nil || id < first.Execution.Execution) {
			first = x
		}
		return nil
	})
	return errf(ErrInconsistentHistory, "execution %d (%s) is never visited", first.Execution.Execution, first.Occurrence.Node)
}
