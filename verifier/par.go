package verifier

import (
	"github.com/oecp/oecp/graph"
)

// branchWrites is the set of state paths a par branch writes into the par
// scope: an executable's write targets, or the promoted paths of a group
// branch that something inside it writes.
func branchWrites(n graph.Node) []string {
	var out []string
	if wbs, ok := writeBindings(n); ok {
		for _, b := range wbs {
			out = append(out, pathString(b.Target))
		}
		return out
	}
	var inner []string
	for _, c := range graph.Children(n) {
		inner = append(inner, branchWrites(c)...)
	}
	for _, pp := range groupPromoted(n) {
		ps := pathString(pp)
		for _, w := range inner {
			if prefixRelated(ps, w) {
				out = append(out, ps)
				break
			}
		}
	}
	return out
}

// prefixRelated reports whether one dotted path equals the other or is a
// prefix of it.
func prefixRelated(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == b || (len(b) > len(a) && b[:len(a)] == a && b[len(a)] == '.')
}

// parJoin is what the join of one par needs once its branches ran.
type parJoin struct {
	t        *graph.Par
	p        graph.Path
	done     []map[int][]*world // branch -> incoming world tag -> completing worlds
	mayFail  []bool             // branch may end without completing (or, for first, satisfying the guard)
	required int                // completing branches the join waits for
	reached  string             // the join control's label when they complete
	missed   string             // and when they cannot
}

// par analyses a parallel node: write conflicts of an all join, every
// branch from every incoming world, then the join's outcomes from each
// incoming world, promoting the par scope only where the join was reached.
func (a *analyzer) par(t *graph.Par, p graph.Path, ws []*world, sc scope) ([]*world, bool) {
	inner := a.enterGroup(t, p, t.State, sc)
	legal := true
	if t.Join.Kind == graph.JoinFirst && t.Join.When != nil {
		legal = a.checkGuard(t.Join.When, p.With(graph.FieldSeg("join"), graph.FieldSeg("when")), graph.CodeChoiceExhaustiveness)
	}
	if t.Join.Kind == graph.JoinAll {
		a.checkWriteConflicts(t, p)
	}
	tags, cur := a.tagWorlds(ws)
	j, term := a.runBranches(t, p, cur, inner, legal)
	var out []*world
	for i, w := range ws {
		out = a.joinOutcomes(j, w, tags[i], out)
	}
	out = a.check(out, p, t)
	// Only reached worlds carry the joined par scope, and only they promote.
	var joined, other []*world
	for _, w := range out {
		if len(w.scopes) > len(ws0scopes(ws)) {
			joined = append(joined, w)
		} else {
			other = append(other, w)
		}
	}
	joined = a.exitGroup(t, p, t.State, t.PromotedStatePaths, joined, sc)
	return a.check(append(joined, other...), p, t), term
}

// checkWriteConflicts reports the branches of an all join whose writes into
// the par scope overlap (one path equal to or a prefix of another).
func (a *analyzer) checkWriteConflicts(t *graph.Par, p graph.Path) {
	writes := make([][]string, len(t.Branches))
	for i, b := range t.Branches {
		writes[i] = branchWrites(b)
	}
	conflict := map[string]bool{}
	for i := range writes {
		for j := i + 1; j < len(writes); j++ {
			for _, x := range writes[i] {
				for _, y := range writes[j] {
					if prefixRelated(x, y) {
						conflict[t.Branches[i].NodeName()] = true
						conflict[t.Branches[j].NodeName()] = true
					}
				}
			}
		}
	}
	if len(conflict) > 0 {
		a.emit(graph.CodeWriteConflict, p.With(graph.FieldSeg("branches")), sortedKeys(conflict), "parallel all branches have overlapping writes")
	}
}

// runBranches analyses every branch from the tagged worlds cur and returns
// the join's inputs, and whether some branch reached a terminal.
func (a *analyzer) runBranches(t *graph.Par, p graph.Path, cur []*world, inner scope, legal bool) (*parJoin, bool) {
	nb := len(t.Branches)
	j := &parJoin{t: t, p: p, done: make([]map[int][]*world, nb), mayFail: make([]bool, nb),
		required: nb, reached: "reached", missed: "quorum_unreachable"}
	switch t.Join.Kind {
	case graph.JoinAny:
		j.required = 1
	case graph.JoinFirst:
		j.required, j.reached, j.missed = 1, "satisfied", "no_satisfier"
	case graph.JoinQuorum:
		j.required = int(min(t.Join.Count, uint64(nb)))
	}
	readerMaps := a.maps[t.Name]
	term := false
	for i, b := range t.Branches {
		bp := p.With(graph.FieldSeg("branches"), graph.IndexSeg(i), graph.NodeSeg(b.NodeName()))
		c, tm := a.node(b, bp, cloneAll(cur), inner)
		term = term || tm
		j.mayFail[i] = tm
		j.done[i] = map[int][]*world{}
		for _, w := range c {
			if t.Join.Kind == graph.JoinFirst {
				if !legal || t.Join.When == nil || !a.eval(t.Join.When, w, readerMaps) {
					j.mayFail[i] = true
					continue
				}
			}
			j.done[i][w.tag] = append(j.done[i][w.tag], w)
		}
	}
	return j, term
}

// joinOutcomes appends the join's outcomes from incoming world w (tag):
// unreachable when fewer than the required branches surely complete, and a
// joined world for every choice of required winners that can complete.
func (a *analyzer) joinOutcomes(j *parJoin, w *world, tag int, out []*world) []*world {
	gKey := j.t.Name + "|g"
	must, can := 0, 0
	for b := range j.done {
		if len(j.done[b][tag]) > 0 {
			can++
			if !j.mayFail[b] {
				must++
			}
		}
	}
	if must < j.required {
		u := w.clone()
		if a.relevant[gKey] {
			u.set(gKey, j.missed)
		}
		out = append(out, u)
	}
	if can < j.required {
		return out
	}
	for _, sub := range a.winnerSets(j, tag) {
		combos := []*world{nil}
		for _, b := range sub {
			var next []*world
			for _, acc := range combos {
				for _, bw := range j.done[b][tag] {
					a.spend(1, j.p, j.t)
					next = append(next, joinWorld(w, acc, bw))
				}
			}
			combos = a.check(next, j.p, j.t)
		}
		for _, c := range combos {
			if a.relevant[gKey] {
				c.set(gKey, j.reached)
			}
			out = append(out, c)
		}
	}
	return out
}

// winnerSets lists every set of j.required branches that complete from the
// incoming world tag (stopping past maxAssignments sets).
func (a *analyzer) winnerSets(j *parJoin, tag int) [][]int {
	var subsets [][]int
	var pick func(start int, chosen []int)
	pick = func(start int, chosen []int) {
		a.spend(1, j.p, j.t)
		if len(chosen) == j.required {
			subsets = append(subsets, append([]int(nil), chosen...))
			return
		}
		for b := start; b < len(j.done); b++ {
			if len(j.done[b][tag]) > 0 {
				pick(b+1, append(chosen, b))
			}
			if len(subsets) > maxAssignments {
				return
			}
		}
	}
	pick(0, nil)
	return subsets
}

const maxAssignments = graph.MaxFiniteCheckAssignments

// ws0scopes is the scope stack of the incoming worlds (all alike in depth).
func ws0scopes(ws []*world) []map[string]bool {
	if len(ws) == 0 {
		return nil
	}
	return ws[0].scopes
}

// joinWorld folds one winner's branch world into the joined world (acc, or
// the incoming world w with a fresh par scope).
func joinWorld(w, acc, bw *world) *world {
	bw.m.charge(bw.size() + len(w.ok))
	var j *world
	if acc == nil {
		j = w.clone()
		j.push()
	} else {
		j = acc.clone()
	}
	for k, v := range bw.ctl {
		if w.ctl[k] != v {
			j.set(k, v)
		}
	}
	for k := range bw.top() {
		j.top()[k] = true
	}
	for k := range bw.ran {
		j.ran[k] = true
	}
	for k := range bw.ok {
		j.ok[k] = true
	}
	for k := range w.ok {
		if !bw.ok[k] && bw.ran[k] {
			delete(j.ok, k)
		}
	}
	return j
}
