package verifier

import (
	"sort"

	"github.com/oecp/oecp/graph"
)

// branchWrites is the set of state paths a par branch writes into the par
// scope: an executable's write targets, or the promoted paths of a group
// branch that something inside it writes.
func branchWrites(n graph.Node) []string {
	var out []string
	switch t := n.(type) {
	case *graph.Step:
		for _, b := range t.WriteBindings {
			out = append(out, pathString(b.Target))
		}
	case *graph.Verifier:
		for _, b := range t.WriteBindings {
			out = append(out, pathString(b.Target))
		}
	default:
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
	}
	return out
}

func prefixRelated(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == b || (len(b) > len(a) && b[:len(a)] == a && b[len(a)] == '.')
}

func (a *analyzer) par(t *graph.Par, p graph.Path, ws []*world, sc scope) ([]*world, bool) {
	inner := a.enterGroup(t, p, t.State, sc)
	readerMaps := a.maps[t.Name]
	legal := true
	if t.Join.Kind == graph.JoinFirst && t.Join.When != nil {
		legal = a.checkSelectors(t.Join.When, p.With(graph.FieldSeg("join"), graph.FieldSeg("when")), graph.CodeChoiceExhaustiveness)
	}
	if t.Join.Kind == graph.JoinAll {
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
			names := sortedKeys(conflict)
			a.emit(graph.CodeWriteConflict, p.With(graph.FieldSeg("branches")), names, "parallel all branches have overlapping writes")
		}
	}
	// Tag every incoming world so branch results pair up with their origin.
	tags := make([]int, len(ws))
	cur := make([]*world, len(ws))
	for i, w := range ws {
		a.nextTag++
		tags[i] = a.nextTag
		c := w.clone()
		c.tag = a.nextTag
		c.push()
		cur[i] = c
	}
	nb := len(t.Branches)
	done := make([]map[int][]*world, nb) // branch -> tag -> completing worlds
	mayFail := make([]bool, nb)
	term := false
	for i, b := range t.Branches {
		bp := p.With(graph.FieldSeg("branches"), graph.IndexSeg(i), graph.NodeSeg(b.NodeName()))
		c, tm := a.node(b, bp, cloneAll(cur), inner)
		term = term || tm
		mayFail[i] = tm
		done[i] = map[int][]*world{}
		for _, w := range c {
			if t.Join.Kind == graph.JoinFirst {
				if !legal || t.Join.When == nil || !a.eval(t.Join.When, w, readerMaps) {
					mayFail[i] = true
					continue
				}
			}
			done[i][w.tag] = append(done[i][w.tag], w)
		}
	}
	required := nb
	field, reached, unreachable := "joined", "reached", "quorum_unreachable"
	switch t.Join.Kind {
	case graph.JoinAny:
		required = 1
	case graph.JoinFirst:
		required = 1
		field, reached, unreachable = "raced", "satisfied", "no_satisfier"
	case graph.JoinQuorum:
		required = int(min(t.Join.Count, uint64(nb)))
	}
	_ = field
	gKey := t.Name + "|g"
	var out []*world
	for i, w := range ws {
		tag := tags[i]
		must := 0
		can := 0
		for b := 0; b < nb; b++ {
			if len(done[b][tag]) > 0 {
				can++
				if !mayFail[b] {
					must++
				}
			}
		}
		if must < required {
			u := w.clone()
			if a.relevant[gKey] {
				u.set(gKey, unreachable)
			}
			out = append(out, u)
		}
		if can < required {
			continue
		}
		// Every choice of `required` completing branches can win.
		var subsets [][]int
		var pick func(start int, chosen []int)
		pick = func(start int, chosen []int) {
			a.spend(1, p, t)
			if len(chosen) == required {
				subsets = append(subsets, append([]int(nil), chosen...))
				return
			}
			for b := start; b < nb; b++ {
				if len(done[b][tag]) > 0 {
					pick(b+1, append(chosen, b))
				}
				if len(subsets) > maxAssignments {
					return
				}
			}
		}
		pick(0, nil)
		for _, sub := range subsets {
			combos := []*world{nil}
			for _, b := range sub {
				var next []*world
				for _, acc := range combos {
					for _, bw := range done[b][tag] {
						a.spend(1, p, t)
						next = append(next, joinWorld(w, acc, bw))
					}
				}
				combos = a.check(next, p, t)
			}
			for _, c := range combos {
				if a.relevant[gKey] {
					c.set(gKey, reached)
				}
				out = append(out, c)
			}
		}
	}
	out = a.check(out, p, t)
	// Promotion: only reached worlds carry the joined par scope.
	var joined, other []*world
	for _, w := range out {
		if len(w.scopes) > len(ws0scopes(ws)) {
			joined = append(joined, w)
		} else {
			other = append(other, w)
		}
	}
	joined = a.exitGroup(t, p, t.State, t.PromotedStatePaths, joined, sc)
	for i, pp := range t.PromotedStatePaths {
		_ = i
		_ = pp
	}
	res := append(joined, other...)
	sort.SliceStable(res, func(i, j int) bool { return false })
	return a.check(res, p, t), term
}

const maxAssignments = graph.MaxFiniteCheckAssignments

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
