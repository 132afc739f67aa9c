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
// returns what should happen next (spec/05 with the attempts/hold policy
// of NOTES.md). It is pure and deterministic: no I/O, no clock, and the
// order of h's slices does not matter.
//
// A returned error wraps one of the Err* sentinels; the supervisor should
// terminalise the run as failed with FailureReason(err) (N13).
func Reduce(g *graph.GraphSpec, initialInput json.RawMessage, h History) (Result, error) {
	ix, err := indexGraph(g)
	if err != nil {
		return Result{}, err
	}
	hi, err := indexHistory(ix, h)
	if err != nil {
		return Result{}, err
	}
	state, err := parseValue(initialInput)
	if err != nil {
		return Result{}, err
	}
	e := &evaluator{ix: ix, h: hi, consumed: map[uint64]bool{}, claims: map[uint64]claim{}}
	r, err := e.eval(g.Root, newCtx(state), pass{decide: true, cutoff: inf})
	if err != nil {
		return Result{}, err
	}
	if r.st == stContinue {
		return Result{}, errf(ErrRootCompleted, "root %q finished without a terminal", g.Root.NodeName())
	}
	for id, x := range hi.byID {
		if !e.consumed[id] {
			return Result{}, errf(ErrInconsistentHistory, "execution %d (%s) is never visited", id, x.Occurrence.Node)
		}
		if x.State == StateVoided {
			c, ok := e.claims[id]
			if !ok || c.reason != x.VoidReason || x.Position <= c.cutoff {
				return Result{}, errf(ErrInconsistentHistory, "voided execution %d is not claimed by a join or map terminal", id)
			}
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
// cutoff (§1.4).
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
}

func (e *evaluator) emit(d Decision) { e.decisions = append(e.decisions, d) }

func (e *evaluator) emitContinue(p pass, node string) {
	if p.decide {
		e.emit(Decision{Kind: DecisionContinue, Continue: node})
	}
}

// sortVoids deduplicates void_loser decisions by execution and sorts them
// among their own slots by (dispatch position, execution id) (§1.3).
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
		a, b := e.h.byID[voids[i].Execution], e.h.byID[voids[j].Execution]
		return cmp.Or(cmp.Compare(a.DispatchPosition, b.DispatchPosition), cmp.Compare(a.Execution.Execution, b.Execution.Execution)) < 0
	})
	for i, s := range slots {
		out[s] = Decision{Kind: DecisionVoidLoser, VoidLoser: voids[i]}
	}
	return out
}

func (e *evaluator) eval(n graph.Node, c *ctx, p pass) (res, error) {
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
		out, err := c.buildInput(t.Bindings)
		if err != nil {
			return res{}, err
		}
		b, err := canonical(out)
		if err != nil {
			return res{}, err
		}
		return res{st: stTerminal, term: &Terminal{Status: TerminalSucceeded, Output: b}}, nil
	case *graph.Fail:
		return res{st: stTerminal, term: &Terminal{Status: TerminalFailed, Reason: t.Reason}}, nil
	}
	return res{}, errf(ErrInvalidGraph, "unknown node %T", n)
}

type execNode struct {
	name      string
	kind      graph.NodeKind
	worker    string
	timeoutMs uint64
	attempts  uint64
	inputs    []graph.InputBinding
	writes    []graph.WriteBinding
	signals   map[string][]string
}

// evalExec visits a step or verifier (§4.1 with per-visit attempts).
func (e *evaluator) evalExec(n execNode, c *ctx, p pass) (res, error) {
	occ := occKey(n.name, c.scope)
	inVal, err := c.buildInput(n.inputs)
	if err != nil {
		return res{}, err
	}
	in, err := canonical(inVal)
	if err != nil {
		return res{}, err
	}
	k := c.visits[occ] + 1
	visits := e.h.byOcc[occ]
	if k > len(visits) {
		if p.dispatches() {
			if err := e.dispatch(n, c.scope, occ, 1, in); err != nil {
				return res{}, err
			}
		}
		return pending, nil
	}
	v := visits[k-1]
	c.visits[occ] = k
	for _, x := range v.entries {
		e.consumed[x.Execution.Execution] = true
		if x.input != string(in) {
			return res{}, errf(ErrInconsistentHistory, "execution %d of %q: recorded input %s differs from %s", x.Execution.Execution, n.name, x.input, in)
		}
	}
	budget := max(n.attempts, 1) + v.grants
	for i, x := range v.entries {
		if x.Attempt > budget {
			return res{}, errf(ErrInconsistentHistory, "execution %d of %q: attempt %d beyond its budget %d", x.Execution.Execution, n.name, x.Attempt, budget)
		}
		if x.DispatchPosition > p.cutoff || x.State != StateSettled || x.Position > p.cutoff {
			return pending, nil
		}
		o := x.Outcome
		switch {
		case o.Status == OutcomeError:
		case o.Status == OutcomeVerified && n.kind == graph.KindStep, o.Status == OutcomeVerifier && n.kind == graph.KindVerifier:
			if err := e.applySuccess(n, c, o, p); err != nil {
				return res{}, err
			}
			return res{st: stContinue, pos: x.Position}, nil
		default:
			return res{}, errf(ErrInconsistentHistory, "execution %d: %s outcome for %s %q", x.Execution.Execution, o.Status, n.kind, n.name)
		}
		if i < len(v.entries)-1 {
			continue // a later attempt exists (indexHistory checked the chain)
		}
		if x.Attempt < budget {
			if p.dispatches() {
				if err := e.dispatch(n, c.scope, occ, x.Attempt+1, in); err != nil {
					return res{}, err
				}
			}
			return pending, nil
		}
		if e.ix.errorRouted[n.name] {
			e.applyError(n, c, o.Code)
			e.emitContinue(p, n.name)
			return res{st: stContinue, pos: x.Position}, nil
		}
		if p.dispatches() {
			e.emit(Decision{Kind: DecisionHold, Hold: &Hold{
				Execution: x.Execution.Execution, NodeInstance: x.NodeInstance,
				Occurrence: x.Occurrence, Attempt: x.Attempt, Code: o.Code,
			}})
		}
		return pending, nil
	}
	return pending, nil // unreachable: a visit has at least one entry
}

func (e *evaluator) dispatch(n execNode, scope []uint64, occ string, attempt uint64, in json.RawMessage) error {
	ni, ok := e.h.niOcc[occ]
	if !ok {
		if e.h.nextNI > MaxIdentity {
			return errf(ErrIdentityOutOfRange, "node instance ids exhausted")
		}
		ni = e.h.nextNI
		e.h.nextNI++
		e.h.niOcc[occ] = ni
	}
	if e.h.nextEx > MaxIdentity {
		return errf(ErrIdentityOutOfRange, "execution ids exhausted")
	}
	ex := e.h.nextEx
	e.h.nextEx++
	e.emit(Decision{Kind: DecisionDispatch, Dispatch: &Dispatch{
		NodeInstance: ni, Execution: ex,
		Occurrence: Occurrence{Node: n.name, MapIndices: slices.Clone(scope)},
		Attempt:    attempt, Kind: n.kind, Worker: n.worker, Input: in, TimeoutMs: n.timeoutMs,
	}})
	return nil
}

// clearControls clears n's signal and error controls at the current scope:
// an executable's latest outcome replaces its earlier ones (N4).
func (e *evaluator) clearControls(n execNode, c *ctx) {
	for f := range n.signals {
		k := ctrlKey{node: n.name, source: graph.ControlSignal, field: f, hasField: true, idx: idxKey(c.scope)}
		if _, ok := c.controls[k]; ok {
			c.controls[k] = ctrlVal{indices: c.scope}
		}
	}
	k := ctrlKey{node: n.name, source: graph.ControlError, idx: idxKey(c.scope)}
	if _, ok := c.controls[k]; ok {
		c.controls[k] = ctrlVal{indices: c.scope}
	}
}

func (e *evaluator) applyError(n execNode, c *ctx, code string) {
	e.clearControls(n, c)
	c.setControl(n.name, graph.ControlError, nil, c.scope, code)
}

// applySuccess records a successful outcome (§2.6): signal controls, the
// channel, then the write bindings in authored order.
func (e *evaluator) applySuccess(n execNode, c *ctx, o *Outcome, p pass) error {
	e.clearControls(n, c)
	out, err := parseValue(o.Output)
	if err != nil {
		return err
	}
	ch := &channel{out: out, signals: map[string]string{}}
	if n.kind == graph.KindVerifier {
		if ch.diag, err = parseValue(o.Diagnostic); err != nil {
			return err
		}
		fields := make([]string, 0, len(o.Signals))
		for f := range o.Signals {
			fields = append(fields, f)
		}
		slices.Sort(fields)
		for _, f := range fields {
			ch.signals[f] = o.Signals[f]
			c.setControl(n.name, graph.ControlSignal, strp(f), c.scope, o.Signals[f])
		}
	}
	c.channels[chanKey{n.name, idxKey(c.scope)}] = ch
	var vals []Promoted
	for _, wb := range n.writes {
		v, err := e.readChannel(c, wb.Value)
		if err != nil {
			return err
		}
		if c.state, err = setPath(c.state, wb.Target, v); err != nil {
			return err
		}
		c.written = addWritten(c.written, wb.Target)
		if p.decide {
			b, err := canonical(v)
			if err != nil {
				return err
			}
			vals = append(vals, Promoted{Path: wb.Target, Value: b})
		}
	}
	if p.decide {
		if len(vals) > 0 {
			e.emit(Decision{Kind: DecisionPromote, Promote: &Promote{Node: n.name, MapIndices: slices.Clone(c.scope), Values: vals}})
		}
		e.emitContinue(p, n.name)
	}
	return nil
}

// readChannel resolves a write binding's value. The source's channel is
// looked up at the source's own map depth (a prefix of the writer's scope),
// which fixes N9.
func (e *evaluator) readChannel(c *ctx, sel graph.NodeOutputSelector) (any, error) {
	d := e.ix.depth[sel.Node]
	if d > len(c.scope) {
		return nil, errf(ErrMissingSelectedValue, "channel of %q is inside a map the writer is outside of", sel.Node)
	}
	ch, ok := c.channels[chanKey{sel.Node, idxKey(c.scope[:d])}]
	if !ok {
		return nil, errf(ErrMissingSelectedValue, "%q has no successful outcome in this scope", sel.Node)
	}
	switch sel.Channel {
	case graph.ChannelOut:
		return selectPath(ch.out, sel.Path)
	case graph.ChannelDiagnostic:
		return selectPath(ch.diag, sel.Path)
	case graph.ChannelSignal:
		if len(sel.Path) == 0 {
			return nil, errf(ErrMissingSelectedValue, "signal read of %q without a field", sel.Node)
		}
		l, ok := ch.signals[sel.Path[0]]
		if !ok {
			return nil, errf(ErrMissingSelectedValue, "%q has no signal %q", sel.Node, sel.Path[0])
		}
		return l, nil
	}
	return nil, errf(ErrInvalidGraph, "unknown channel %q", sel.Channel)
}

// promote is the §3.1 copy-out of seq, choice and loop: every promoted path
// is copied from local to parent, the really-written parts join the parent's
// written set, and the local facts replace the parent's.
func (e *evaluator) promote(name string, paths []graph.FieldPath, local, parent *ctx, p pass) error {
	var vals []Promoted
	for _, P := range paths {
		v, err := selectPath(local.state, P)
		if err != nil {
			return err
		}
		if parent.state, err = setPath(parent.state, P, v); err != nil {
			return err
		}
		if p.decide {
			b, err := canonical(v)
			if err != nil {
				return err
			}
			vals = append(vals, Promoted{Path: P, Value: b})
		}
	}
	for _, w := range writtenUnder(paths, local.written) {
		parent.written = addWritten(parent.written, w)
	}
	parent.adoptFacts(local)
	if p.decide && len(vals) > 0 {
		e.emit(Decision{Kind: DecisionPromote, Promote: &Promote{Node: name, MapIndices: slices.Clone(parent.scope), Values: vals}})
	}
	return nil
}

func raise(r res, pos uint64) res {
	r.pos = max(r.pos, pos)
	return r
}

func (e *evaluator) evalSeq(n *graph.Seq, c *ctx, p pass) (res, error) {
	local := c.clone()
	var pos uint64
	for _, ch := range n.Children {
		r, err := e.eval(ch, local, p)
		if err != nil {
			return res{}, err
		}
		switch r.st {
		case stPending:
			return r, nil
		case stTerminal:
			return raise(r, pos), nil
		}
		pos = max(pos, r.pos)
	}
	if err := e.promote(n.Name, n.PromotedStatePaths, local, c, p); err != nil {
		return res{}, err
	}
	e.emitContinue(p, n.Name)
	return res{st: stContinue, pos: pos}, nil
}

func (e *evaluator) evalChoice(n *graph.Choice, c *ctx, p pass) (res, error) {
	local := c.clone()
	var sel graph.Node
	for i := range n.Branches {
		if local.evalGuard(e.ix, &n.Branches[i].When) {
			sel = n.Branches[i].Node
			break
		}
	}
	if sel == nil {
		sel = n.Otherwise
	}
	if sel == nil {
		return res{}, errf(ErrMissingChoiceRoute, "choice %q: no branch matched and no otherwise", n.Name)
	}
	r, err := e.eval(sel, local, p)
	if err != nil || r.st != stContinue {
		return r, err
	}
	if err := e.promote(n.Name, n.PromotedStatePaths, local, c, p); err != nil {
		return res{}, err
	}
	e.emitContinue(p, n.Name)
	return r, nil
}

func (e *evaluator) evalLoop(n *graph.Loop, c *ctx, p pass) (res, error) {
	local := c.clone()
	var pos uint64
	label := "exhausted"
	for i := uint64(0); i < n.MaxIterations; i++ {
		r, err := e.eval(n.Body, local, p)
		if err != nil {
			return res{}, err
		}
		switch r.st {
		case stPending:
			return r, nil
		case stTerminal:
			return raise(r, pos), nil
		}
		pos = max(pos, r.pos)
		if n.Until != nil && local.evalGuard(e.ix, n.Until) {
			label = "converged"
			break
		}
	}
	local.setControl(n.Name, graph.ControlGroup, strp("terminated"), c.scope, label)
	if err := e.promote(n.Name, n.PromotedStatePaths, local, c, p); err != nil {
		return res{}, err
	}
	e.emitContinue(p, n.Name)
	return res{st: stContinue, pos: pos}, nil
}

// claimLosers claims the unsettled executions consumed so far under subtree
// (restricted to map indices under scope and outside exclude) for a join or
// map terminal at cutoff (§4.4, §4.6, §7.3 check 9), emitting void_loser for
// the active ones in decide mode.
func (e *evaluator) claimLosers(subtree map[string]bool, scope, exclude []uint64, cutoff uint64, reason VoidReason, p pass) {
	ids := make([]uint64, 0, len(e.consumed))
	for id := range e.consumed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		x := e.h.byID[id]
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

func (e *evaluator) evalPar(n *graph.Par, c *ctx, p pass) (res, error) {
	in := c.clone()
	need := len(n.Branches)
	ctrlField := "joined"
	reached, unreachable := "reached", "quorum_unreachable"
	switch n.Join.Kind {
	case graph.JoinAny:
		need = 1
	case graph.JoinFirst:
		need = 1
		ctrlField, reached, unreachable = "raced", "satisfied", "no_satisfier"
	case graph.JoinQuorum:
		need = int(min(n.Join.Count, uint64(len(n.Branches)+1)))
	}
	type branch struct {
		idx  int
		r    res
		ctx  *ctx
		done bool
	}
	probes := make([]branch, len(n.Branches))
	var completed []branch
	anyPending := false
	for i, b := range n.Branches {
		bc := in.clone()
		bc.written = nil
		r, err := e.eval(b, bc, pass{decide: false, cutoff: p.cutoff})
		if err != nil {
			return res{}, err
		}
		done := r.st == stContinue
		if done && n.Join.Kind == graph.JoinFirst {
			done = bc.evalGuard(e.ix, n.Join.When)
		}
		probes[i] = branch{i, r, bc, done}
		if done {
			completed = append(completed, probes[i])
		}
		if r.st == stPending {
			anyPending = true
		}
	}
	if len(completed) < need {
		if anyPending {
			if p.decide {
				for _, b := range n.Branches {
					bc := in.clone()
					bc.written = nil
					if _, err := e.eval(b, bc, p); err != nil {
						return res{}, err
					}
				}
			}
			return pending, nil
		}
		// Unreachable: the par's own control and (N6) the branches' visit
		// counters reach the parent, nothing else.
		var pos uint64
		for _, b := range probes {
			pos = max(pos, b.r.pos)
			c.mergeVisits(b.ctx)
		}
		c.setControl(n.Name, graph.ControlGroup, strp(ctrlField), c.scope, unreachable)
		e.emitContinue(p, n.Name)
		return res{st: stContinue, pos: pos}, nil
	}
	slices.SortStableFunc(completed, func(a, b branch) int {
		return cmp.Or(cmp.Compare(a.r.pos, b.r.pos), cmp.Compare(a.idx, b.idx))
	})
	winners := completed[:need]
	var join uint64
	isWinner := map[int]bool{}
	for _, w := range winners {
		join = max(join, w.r.pos)
		isWinner[w.idx] = true
	}
	for _, b := range probes {
		if !isWinner[b.idx] {
			c.mergeVisits(b.ctx) // N6: losers' visits count too
		}
	}
	wp := pass{decide: p.decide, cutoff: min(join, p.cutoff)}
	for _, w := range winners {
		wc := in.clone()
		wc.written = nil
		r, err := e.eval(n.Branches[w.idx], wc, wp)
		if err != nil {
			return res{}, err
		}
		if r.st != stContinue {
			return res{}, errf(ErrInconsistentHistory, "par %q: winner %q does not complete at the join position", n.Name, n.Branches[w.idx].NodeName())
		}
		for _, P := range writtenUnder(n.PromotedStatePaths, wc.written) {
			v, err := selectPath(wc.state, P)
			if err != nil {
				return res{}, err
			}
			if c.state, err = setPath(c.state, P, v); err != nil {
				return res{}, err
			}
			c.written = addWritten(c.written, P)
		}
		c.mergeFacts(wc, in)
	}
	if p.decide && len(n.PromotedStatePaths) > 0 {
		var vals []Promoted
		for _, P := range n.PromotedStatePaths {
			v, err := selectPath(c.state, P)
			if err != nil {
				return res{}, err
			}
			b, err := canonical(v)
			if err != nil {
				return res{}, err
			}
			vals = append(vals, Promoted{Path: P, Value: b})
		}
		e.emit(Decision{Kind: DecisionPromote, Promote: &Promote{Node: n.Name, MapIndices: slices.Clone(c.scope), Values: vals}})
	}
	c.setControl(n.Name, graph.ControlGroup, strp(ctrlField), c.scope, reached)
	if need < len(n.Branches) {
		for i, b := range n.Branches {
			if !isWinner[i] {
				e.claimLosers(e.ix.subtree[b.NodeName()], c.scope, nil, join, VoidParallelJoin, p)
			}
		}
	}
	e.emitContinue(p, n.Name)
	return res{st: stContinue, pos: join}, nil
}

func (e *evaluator) evalMap(n *graph.Map, c *ctx, p pass) (res, error) {
	var src any
	switch n.Over.Source {
	case graph.SourceState:
		src = c.state
	case graph.SourceItem:
		if !c.hasItem {
			return res{}, errf(ErrMissingSelectedValue, "map %q: item selector outside a map", n.Name)
		}
		src = c.item
	default:
		return res{}, errf(ErrInvalidGraph, "map %q: unknown source %q", n.Name, n.Over.Source)
	}
	v, err := selectPath(src, n.Over.Path)
	if err != nil {
		return res{}, err
	}
	items, ok := v.([]any)
	if !ok {
		return res{}, errf(ErrInvalidDurableValue, "map %q: `over` is not an array", n.Name)
	}
	if uint64(len(items)) > n.MaxItems {
		c.setControl(n.Name, graph.ControlGroup, strp("overflow"), c.scope, "overflow")
		e.emitContinue(p, n.Name)
		return res{st: stContinue, pos: 0}, nil
	}
	base := c.clone()
	// N4: per-item controls of an earlier run of this map (a map inside a
	// loop) do not leak into this run.
	body := e.ix.subtree[n.Body.NodeName()]
	for k, cv := range base.controls {
		if cv.label != "" && len(cv.indices) > len(c.scope) && hasPrefix(cv.indices, c.scope) && body[k.node] {
			base.controls[k] = ctrlVal{indices: cv.indices}
		}
	}
	itemCtx := func(i int) *ctx {
		ic := base.clone()
		ic.scope = append(slices.Clone(c.scope), uint64(i))
		ic.item, ic.hasItem = items[i], true
		ic.written = nil
		return ic
	}
	results := make([]res, len(items))
	ctxs := make([]*ctx, len(items))
	term := -1
	for i := range items {
		ic := itemCtx(i)
		r, err := e.eval(n.Body, ic, pass{decide: false, cutoff: p.cutoff})
		if err != nil {
			return res{}, err
		}
		results[i], ctxs[i] = r, ic
		if r.st == stTerminal && (term < 0 || r.pos < results[term].pos) {
			term = i
		}
	}
	if term >= 0 {
		t := results[term]
		if p.decide {
			if _, err := e.eval(n.Body, itemCtx(term), pass{decide: true, cutoff: min(t.pos, p.cutoff)}); err != nil {
				return res{}, err
			}
		}
		scope := append(slices.Clone(c.scope), uint64(term))
		e.claimLosers(body, c.scope, scope, t.pos, VoidMapTerminal, p)
		return t, nil
	}
	if p.decide {
		for i := range items {
			ic := itemCtx(i)
			r, err := e.eval(n.Body, ic, p)
			if err != nil {
				return res{}, err
			}
			results[i], ctxs[i] = r, ic
		}
	}
	var pos uint64
	for _, r := range results {
		if r.st != stContinue {
			return pending, nil
		}
		pos = max(pos, r.pos)
	}
	var vals []Promoted
	for _, P := range n.PromotedStatePaths {
		arr := make([]any, len(items))
		for i, ic := range ctxs {
			if isWritten(ic.written, P) { // N8: an item that did not write P contributes null
				if arr[i], err = selectPath(ic.state, P); err != nil {
					return res{}, err
				}
			}
		}
		if c.state, err = setPath(c.state, P, arr); err != nil {
			return res{}, err
		}
		c.written = addWritten(c.written, P)
		if p.decide {
			b, err := canonical(arr)
			if err != nil {
				return res{}, err
			}
			vals = append(vals, Promoted{Path: P, Value: b})
		}
	}
	if len(vals) > 0 {
		e.emit(Decision{Kind: DecisionPromote, Promote: &Promote{Node: n.Name, MapIndices: slices.Clone(c.scope), Values: vals}})
	}
	for k, cv := range base.controls {
		c.controls[k] = cv
	}
	for _, ic := range ctxs {
		c.mergeFacts(ic, base)
	}
	c.setControl(n.Name, graph.ControlGroup, strp("overflow"), c.scope, "ok")
	e.emitContinue(p, n.Name)
	return res{st: stContinue, pos: pos}, nil
}
