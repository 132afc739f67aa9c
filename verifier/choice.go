package verifier

import "github.com/oecp/oecp/graph"

// choice analyses a choice: each branch runs in the worlds its guard
// selects after the earlier branches took theirs, otherwise in the rest; a
// branch or otherwise no world reaches, or worlds no branch takes and no
// otherwise catches, break exhaustiveness.
func (a *analyzer) choice(t *graph.Choice, p graph.Path, ws []*world, sc scope) ([]*world, bool) {
	inner := a.enterGroup(t, p, t.State, sc)
	cur := pushAll(ws)
	readerMaps := a.maps[t.Name]
	legal := true
	for i := range t.Branches {
		wp := p.With(graph.FieldSeg("branches"), graph.IndexSeg(i), graph.FieldSeg("when"))
		if !a.checkGuard(&t.Branches[i].When, wp, graph.CodeChoiceExhaustiveness) {
			legal = false
		}
	}
	var done []*world
	term := false
	remaining := cur
	for i, b := range t.Branches {
		bp := p.With(graph.FieldSeg("branches"), graph.IndexSeg(i), graph.FieldSeg("node"), graph.NodeSeg(b.Node.NodeName()))
		var sat, rest []*world
		if legal {
			for _, w := range remaining {
				if a.eval(&t.Branches[i].When, w, readerMaps) {
					sat = append(sat, w)
				} else {
					rest = append(rest, w)
				}
			}
			if len(sat) == 0 && len(cur) > 0 {
				a.emit(graph.CodeChoiceExhaustiveness, p.With(graph.FieldSeg("branches"), graph.IndexSeg(i), graph.FieldSeg("when")),
					[]string{t.Name}, "choice branch is unreachable after excluding earlier branches")
			}
			remaining = rest
		} else {
			sat = cloneAll(cur)
		}
		c, tm := a.node(b.Node, bp, sat, inner)
		done = append(done, c...)
		term = term || tm
	}
	if !legal {
		remaining = cloneAll(cur)
	}
	if t.Otherwise != nil {
		op := p.With(graph.FieldSeg("otherwise"), graph.NodeSeg(t.Otherwise.NodeName()))
		if legal && len(remaining) == 0 && len(cur) > 0 {
			a.emit(graph.CodeChoiceExhaustiveness, op, []string{t.Name},
				"choice otherwise is unreachable after excluding every branch")
		}
		c, tm := a.node(t.Otherwise, op, remaining, inner)
		done = append(done, c...)
		term = term || tm
	} else if legal && len(remaining) > 0 {
		a.emit(graph.CodeChoiceExhaustiveness, p.With(graph.FieldSeg("branches")), []string{t.Name},
			"choice branches do not cover every legal control assignment")
		done = append(done, remaining...)
	}
	return a.exitGroup(t, p, t.State, t.PromotedStatePaths, a.check(done, p, t), sc), term
}

// cloneAll clones every world of ws.
func cloneAll(ws []*world) []*world {
	out := make([]*world, len(ws))
	for i, w := range ws {
		out[i] = w.clone()
	}
	return out
}
