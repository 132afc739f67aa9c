package verifier

import "github.com/oecp/oecp/graph"

// loop analyses a do-while loop: the body runs up to maxIterations times
// (stopping early at a fixpoint), worlds satisfying until exit converged and
// the rest exhausted; an until guard no completing world satisfies is
// unsatisfiable.
func (a *analyzer) loop(t *graph.Loop, p graph.Path, ws []*world, sc scope) ([]*world, bool) {
	inner := a.enterGroup(t, p, t.State, sc)
	up := p.With(graph.FieldSeg("until"))
	legal := true
	if t.Until != nil {
		legal = a.checkGuard(t.Until, up, graph.CodeLoopExitSatisfiability)
	}
	readerMaps := a.maps[t.Name]
	bp := p.With(graph.FieldSeg("body"), graph.NodeSeg(t.Body.NodeName()))
	cur := pushAll(ws)
	var exits []*world
	term, completed, converged := false, false, false
	var prev []*world
	iters := t.MaxIterations
	for i := uint64(1); i <= iters; i++ {
		c, tm := a.node(t.Body, bp, cur, inner)
		term = term || tm
		completed = completed || len(c) > 0
		var rest []*world
		for _, w := range c {
			if t.Until != nil && legal && a.eval(t.Until, w, readerMaps) {
				converged = true
				w.set(t.Name+"|g", "converged")
				exits = append(exits, w)
			} else {
				rest = append(rest, w)
			}
		}
		rest = a.check(rest, p, t)
		fixed := prev != nil && sameWorlds(prev, rest)
		if i == iters || fixed || len(rest) == 0 {
			for _, w := range rest {
				w.set(t.Name+"|g", "exhausted")
			}
			exits = append(exits, rest...)
			break
		}
		prev = cloneAll(rest)
		cur = rest
	}
	if t.Until != nil && legal && completed && !converged {
		a.emit(graph.CodeLoopExitSatisfiability, up, []string{t.Name}, "loop exit guard is unsatisfiable")
	}
	for _, w := range exits {
		if !a.relevant[t.Name+"|g"] {
			w.set(t.Name+"|g", "")
		}
	}
	return a.exitGroup(t, p, t.State, t.PromotedStatePaths, a.check(exits, p, t), sc), term
}
