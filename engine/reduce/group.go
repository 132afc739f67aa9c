package reduce

import (
	"slices"

	"github.com/oecp/oecp/graph"
)

// promote is the copy-out of seq, choice and loop: every promoted path is
// copied from local to parent, the really-written parts join the parent's
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
		if vals, err = e.appendPromoted(vals, p, P, v); err != nil {
			return err
		}
	}
	for _, w := range writtenUnder(paths, local.written) {
		parent.written = addWritten(parent.written, w)
	}
	parent.adoptFacts(local)
	if p.decide {
		e.emitPromote(name, parent.scope, vals)
	}
	return nil
}

// appendPromoted adds the promoted value v at path to vals in decide mode
// (only decide mode reports promotions, and a reduction with a memo
// reports none).
func (e *evaluator) appendPromoted(vals []Promoted, p pass, path graph.FieldPath, v any) ([]Promoted, error) {
	if !p.decide || e.memo != nil {
		return vals, nil
	}
	b, err := canonical(v)
	if err != nil {
		return nil, err
	}
	return append(vals, Promoted{Path: path, Value: b}), nil
}

// emitPromote emits a promote decision of node at scope, unless vals is
// empty.
func (e *evaluator) emitPromote(node string, scope []uint64, vals []Promoted) {
	if len(vals) > 0 {
		e.emit(Decision{Kind: DecisionPromote, Promote: &Promote{Node: node, MapIndices: slices.Clone(scope), Values: vals}})
	}
}

func raise(r res, pos uint64) res {
	r.pos = max(r.pos, pos)
	return r
}

// evalInSequence evaluates one child of a sequence (a seq child or a loop
// iteration) and folds a continuing result's position into pos. stop
// reports that the sequence ends here with r: the child is pending or
// reached a terminal (whose position is raised to the sequence's so far).
func (e *evaluator) evalInSequence(n graph.Node, local *ctx, p pass, pos *uint64) (r res, stop bool, err error) {
	r, err = e.eval(n, local, p)
	if err != nil {
		return res{}, true, err
	}
	switch r.st {
	case stPending:
		return r, true, nil
	case stTerminal:
		return raise(r, *pos), true, nil
	}
	*pos = max(*pos, r.pos)
	return r, false, nil
}

func (e *evaluator) evalSeq(n *graph.Seq, c *ctx, p pass) (res, error) {
	local := c.clone()
	var pos uint64
	for _, ch := range n.Children {
		if r, stop, err := e.evalInSequence(ch, local, p, &pos); stop {
			return r, err
		}
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
	key, i := e.resumeLoop(n.Name, p, &local, &pos)
	for ; i < n.MaxIterations; i++ {
		if r, stop, err := e.evalInSequence(n.Body, local, p, &pos); stop {
			return r, err
		}
		if n.Until != nil && local.evalGuard(e.ix, n.Until) {
			label = "converged"
			break
		}
		e.keepLoopPoint(key, i+1, local, pos)
	}
	local.setControl(n.Name, graph.ControlGroup, strp("terminated"), c.scope, label)
	if err := e.promote(n.Name, n.PromotedStatePaths, local, c, p); err != nil {
		return res{}, err
	}
	e.emitContinue(p, n.Name)
	return res{st: stContinue, pos: pos}, nil
}
