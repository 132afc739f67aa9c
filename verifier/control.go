package verifier

import (
	"encoding/json"
	"slices"
	"sort"

	"github.com/oecp/oecp/graph"
)

// legalSelector reports whether s names a control the node really has
// (§5.3 closed control domains).
func (a *analyzer) legalSelector(s graph.ControlSelector) bool {
	n, ok := a.nodes[s.Name]
	if !ok {
		return false
	}
	switch s.Source {
	case graph.ControlSignal:
		v, ok := n.(*graph.Verifier)
		if !ok || s.Field == nil {
			return false
		}
		_, ok = v.Signals[*s.Field]
		return ok
	case graph.ControlError:
		switch n.(type) {
		case *graph.Step, *graph.Verifier:
			return s.Field == nil
		}
		return false
	case graph.ControlGroup:
		if s.Field == nil {
			return false
		}
		switch t := n.(type) {
		case *graph.Loop:
			return *s.Field == "terminated"
		case *graph.Map:
			return *s.Field == "overflow"
		case *graph.Par:
			if t.Join.Kind == graph.JoinFirst {
				return *s.Field == "raced"
			}
			return *s.Field == "joined"
		}
	}
	return false
}

// checkSelectors reports illegal selectors of guard g (at path p) and
// returns whether all are legal.
func (a *analyzer) checkSelectors(g *graph.Guard, p graph.Path, code graph.DiagnosticCode) bool {
	ok := true
	for _, s := range g.Selectors() {
		if !a.legalSelector(s) {
			ok = false
			a.emit(code, p, []string{s.Name}, "illegal control selector for node %s", s.Name)
		}
	}
	return ok
}

// labels resolves a control selector in a world to its list of labels: at
// most one for a node in the reader's own map scope, one per item (flattened)
// when reading into a map from outside.
func (a *analyzer) labels(w *world, s graph.ControlSelector, readerMaps []string) []string {
	key := ctlKey(s)
	target := a.maps[s.Name]
	var outside []string
	for i, m := range target {
		if i >= len(readerMaps) || readerMaps[i] != m {
			outside = target[i:]
			break
		}
	}
	if len(outside) == 0 {
		if v := w.ctl[key]; v != "" {
			return []string{v}
		}
		return nil
	}
	return a.aggLabels(w.ctl, outside, key)
}

func (a *analyzer) aggLabels(ctl map[string]string, maps []string, key string) []string {
	enc := ctl[aggKey(maps[0])]
	if enc == "" {
		return nil
	}
	entries, ok := a.aggCache[enc]
	if !ok {
		a.m.charge(1 + len(enc)/16)
		_ = json.Unmarshal([]byte(enc), &entries)
		a.aggCache[enc] = entries
	}
	var out []string
	a.m.charge(1 + len(entries))
	for _, e := range entries {
		a.m.charge(e.Count)
		var ls []string
		if len(maps) == 1 {
			if v := e.Class[key]; v != "" {
				ls = []string{v}
			}
		} else {
			ls = a.aggLabels(e.Class, maps[1:], key)
		}
		for i := 0; i < e.Count; i++ {
			out = append(out, ls...)
		}
	}
	return out
}

func (a *analyzer) matches(ls, labels []string) int {
	a.m.charge(len(ls) * (1 + len(labels)/16))
	n := 0
	for _, l := range ls {
		if slices.Contains(labels, l) {
			n++
		}
	}
	return n
}

func (a *analyzer) eval(g *graph.Guard, w *world, readerMaps []string) bool {
	a.m.charge(1 + len(g.Labels))
	switch g.Kind {
	case graph.GuardIn:
		return g.Value != nil && a.matches(a.labels(w, *g.Value, readerMaps), g.Labels) > 0
	case graph.GuardAll:
		for i := range g.Guards {
			if !a.eval(&g.Guards[i], w, readerMaps) {
				return false
			}
		}
		return true
	case graph.GuardAny:
		for i := range g.Guards {
			if a.eval(&g.Guards[i], w, readerMaps) {
				return true
			}
		}
		return false
	case graph.GuardNot:
		return g.Inner != nil && !a.eval(g.Inner, w, readerMaps)
	case graph.GuardKOfN:
		n := uint64(0)
		for _, s := range g.Values {
			if a.matches(a.labels(w, s, readerMaps), g.Labels) > 0 {
				n++
			}
		}
		return n >= g.Count
	case graph.GuardKOfMap:
		return g.Value != nil && uint64(a.matches(a.labels(w, *g.Value, readerMaps), g.Labels)) >= g.Count
	}
	return false
}

func (a *analyzer) choice(t *graph.Choice, p graph.Path, ws []*world, sc scope) ([]*world, bool) {
	inner := a.enterGroup(t, p, t.State, sc)
	cur := pushAll(ws)
	readerMaps := a.maps[t.Name]
	legal := true
	for i := range t.Branches {
		wp := p.With(graph.FieldSeg("branches"), graph.IndexSeg(i), graph.FieldSeg("when"))
		if !a.checkSelectors(&t.Branches[i].When, wp, graph.CodeChoiceExhaustiveness) {
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
			a.emit(graph.CodeChoiceExhaustiveness, p.With(graph.FieldSeg("otherwise")), []string{t.Name},
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

func cloneAll(ws []*world) []*world {
	out := make([]*world, len(ws))
	for i, w := range ws {
		out[i] = w.clone()
	}
	return out
}

func (a *analyzer) loop(t *graph.Loop, p graph.Path, ws []*world, sc scope) ([]*world, bool) {
	inner := a.enterGroup(t, p, t.State, sc)
	up := p.With(graph.FieldSeg("until"))
	legal := true
	if t.Until != nil {
		legal = a.checkSelectors(t.Until, up, graph.CodeLoopExitSatisfiability)
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

// innerKeys returns the control keys of ws that belong to nodes inside the
// map m (including aggregates of nested maps).
func (a *analyzer) isInside(key, mapName string) bool {
	node := key
	for i := 0; i < len(key); i++ {
		if key[i] == '|' {
			node = key[:i]
			break
		}
	}
	return slices.Contains(a.maps[node], mapName)
}

func (a *analyzer) mapNode(t *graph.Map, p graph.Path, ws []*world, sc scope) ([]*world, bool) {
	inner := a.enterGroup(t, p, t.State, sc)
	op := p.With(graph.FieldSeg("over"))
	overT, ok := a.selectType(op, ws, sc, t.Over)
	var item *graph.PayloadType
	if ok {
		if overT.Kind != graph.PayloadArray || overT.Items == nil {
			a.emit(graph.CodeSchemaSafety, op, []string{t.Name}, "map over selector does not select an array")
		} else {
			it := *overT.Items
			item = &it
		}
	}
	if item == nil {
		null := graph.PayloadType{Kind: graph.PayloadNull}
		item = &null
	}
	inner.item = item
	inner.mapPromote = t.PromotedStatePaths
	// Indexed promotion: the body must write each promoted path at item level.
	for i, pp := range t.PromotedStatePaths {
		pth := p.With(graph.FieldSeg("promotedStatePaths"), graph.IndexSeg(i))
		var elems []graph.PayloadType
		written := false
		switch b := t.Body.(type) {
		case *graph.Step:
			for _, wb := range b.WriteBindings {
				if slices.Equal(wb.Target, pp) {
					written = true
					if vt, ok := a.channelType(wb.Value); ok {
						elems = append(elems, vt)
					}
				}
			}
		case *graph.Verifier:
			for _, wb := range b.WriteBindings {
				if slices.Equal(wb.Target, pp) {
					written = true
					if vt, ok := a.channelType(wb.Value); ok {
						elems = append(elems, vt)
					}
				}
			}
		default:
			st, _ := groupState(t.Body)
			for _, bp := range groupPromoted(t.Body) {
				if slices.Equal(bp, pp) {
					written = true
					if et, ok, _ := typeAt(st, pp); ok {
						elems = append(elems, et)
					}
				}
			}
		}
		if !written {
			a.emit(graph.CodeUndefinedRead, pth, nil, "map promoted path has no indexed body write")
			continue
		}
		if _, ok, _ := typeAt(t.State, pp); !ok {
			a.emit(graph.CodeSchemaSafety, pth, nil, "promoted path is not declared in the group state")
			continue
		}
		outer, ok := a.targetType(sc, pp)
		if !ok {
			a.emit(graph.CodeSchemaSafety, pth, nil, "promoted path is not declared in the enclosing state")
			continue
		}
		for _, e := range elems {
			arr := graph.PayloadType{Kind: graph.PayloadArray, Items: &e}
			if !graph.IsSubtype(arr, outer) {
				a.emit(graph.CodeSchemaSafety, pth, nil, "promoted value is not a subtype of its enclosing state target")
				break
			}
		}
	}
	// Items: analyse the body once from every incoming world, tagged.
	tags := make([]int, len(ws))
	items := make([]*world, len(ws))
	for i, w := range ws {
		a.nextTag++
		tags[i] = a.nextTag
		c := w.clone()
		c.tag = a.nextTag
		c.push()
		items[i] = c
	}
	bp := p.With(graph.FieldSeg("body"), graph.NodeSeg(t.Body.NodeName()))
	done, term := a.node(t.Body, bp, items, inner)
	classes := map[int][]map[string]string{}
	for _, w := range done {
		cl := map[string]string{}
		a.m.charge(1 + len(w.ctl))
		for k, v := range w.ctl {
			if a.isInside(k, t.Name) {
				cl[k] = v
			}
		}
		classes[w.tag] = append(classes[w.tag], cl)
	}
	clip := min(a.clip, int(min(t.MaxItems, graph.MaxMapItems)))
	ovKey := t.Name + "|g"
	var out []*world
	for i, w := range ws {
		tag := tags[i]
		cls := a.dedupeClasses(classes[tag])
		// The incoming world without the map's inner controls, computed once.
		var base *world
		finish := func(agg string, overflow string) {
			o := base.clone()
			if agg != "" && a.hasAggReaders(t.Name) {
				o.set(aggKey(t.Name), agg)
			}
			if a.relevant[ovKey] {
				o.set(ovKey, overflow)
			}
			for _, pp := range t.PromotedStatePaths {
				o.top()[pathString(pp)] = true
			}
			out = append(out, o)
		}
		{
			b := w.clone()
			var inside []string
			a.m.charge(1 + len(b.ctl))
			for k := range b.ctl {
				if a.isInside(k, t.Name) {
					inside = append(inside, k)
				}
			}
			for _, k := range inside {
				b.set(k, "")
			}
			base = b
		}
		finish("", "overflow")
		if !a.hasAggReaders(t.Name) || len(cls) == 0 {
			finish("", "ok")
			continue
		}
		total := 1
		for range cls {
			total *= clip + 1
			if total > graph.MaxFiniteCheckAssignments {
				panic(errCeiling{diag(graph.CodeCeilingExceeded, p, []string{t.Name},
					"finite check exceeds the ceiling of %d control assignments", graph.MaxFiniteCheckAssignments)})
			}
		}
		counts := make([]int, len(cls))
		for {
			a.spend(1, p, t)
			sum := 0
			for _, c := range counts {
				sum += c
			}
			if uint64(sum) <= t.MaxItems {
				var entries []aggEntry
				for j, c := range counts {
					if c > 0 {
						entries = append(entries, aggEntry{Class: cls[j], Count: c})
					}
				}
				enc := "[]"
				if len(entries) > 0 {
					b, _ := json.Marshal(entries)
					enc = string(b)
					a.m.charge(len(b) / 16)
				}
				finish(enc, "ok")
			}
			j := 0
			for j < len(counts) {
				counts[j]++
				if counts[j] <= clip {
					break
				}
				counts[j] = 0
				j++
			}
			if j == len(counts) {
				break
			}
		}
	}
	return a.check(out, p, t), term
}

func (a *analyzer) hasAggReaders(mapName string) bool {
	if v, ok := a.aggRdrM[mapName]; ok {
		return v
	}
	a.m.charge(1 + len(a.relevant))
	v := false
	for k := range a.relevant {
		if a.isInside(k, mapName) {
			v = true
			break
		}
	}
	a.aggRdrM[mapName] = v
	return v
}

func (a *analyzer) dedupeClasses(cls []map[string]string) []map[string]string {
	seen := map[string]bool{}
	var out []map[string]string
	for _, c := range cls {
		b, _ := json.Marshal(c)
		a.m.charge(1 + len(b)/16)
		if seen[string(b)] {
			continue
		}
		seen[string(b)] = true
		out = append(out, c)
	}
	enc := make([]string, len(out))
	for i, c := range out {
		b, _ := json.Marshal(c)
		enc[i] = string(b)
	}
	sort.Sort(byEnc{out, enc})
	return out
}

func groupState(n graph.Node) (graph.PayloadType, bool) {
	switch t := n.(type) {
	case *graph.Seq:
		return t.State, true
	case *graph.Choice:
		return t.State, true
	case *graph.Par:
		return t.State, true
	case *graph.Loop:
		return t.State, true
	case *graph.Map:
		return t.State, true
	}
	return graph.PayloadType{}, false
}

func groupPromoted(n graph.Node) []graph.FieldPath {
	switch t := n.(type) {
	case *graph.Seq:
		return t.PromotedStatePaths
	case *graph.Choice:
		return t.PromotedStatePaths
	case *graph.Par:
		return t.PromotedStatePaths
	case *graph.Loop:
		return t.PromotedStatePaths
	case *graph.Map:
		return t.PromotedStatePaths
	}
	return nil
}

// byEnc sorts classes by their JSON encodings, computed once.
type byEnc struct {
	cls []map[string]string
	enc []string
}

func (b byEnc) Len() int           { return len(b.enc) }
func (b byEnc) Less(i, j int) bool { return b.enc[i] < b.enc[j] }
func (b byEnc) Swap(i, j int) {
	b.cls[i], b.cls[j] = b.cls[j], b.cls[i]
	b.enc[i], b.enc[j] = b.enc[j], b.enc[i]
}
