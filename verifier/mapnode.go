package verifier

import (
	"encoding/json"
	"slices"
	"sort"

	"github.com/oecp/oecp/graph"
)

// isInside reports whether control key belongs to a node inside map mapName
// (including the aggregate of a map nested in it).
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

// mapNode analyses a map: its item type and promoted paths, then its body
// once per incoming world, and then the map's outcomes from each incoming
// world.
func (a *analyzer) mapNode(t *graph.Map, p graph.Path, ws []*world, sc scope) ([]*world, bool) {
	inner := a.enterGroup(t, p, t.State, sc)
	inner.item = a.mapItemType(t, p, ws, sc)
	inner.mapPromote = t.PromotedStatePaths
	for i, pp := range t.PromotedStatePaths {
		a.checkMapPromotion(t, p.With(graph.FieldSeg("promotedStatePaths"), graph.IndexSeg(i)), pp, sc)
	}
	tags, items := a.tagWorlds(ws)
	bp := p.With(graph.FieldSeg("body"), graph.NodeSeg(t.Body.NodeName()))
	done, term := a.node(t.Body, bp, items, inner)
	classes := map[int][]map[string]string{}
	for _, w := range done {
		classes[w.tag] = append(classes[w.tag], a.insideControls(w, t.Name))
	}
	clip := min(a.clip, int(min(t.MaxItems, graph.MaxMapItems)))
	var out []*world
	for i, w := range ws {
		out = a.mapOutcomes(t, p, w, a.dedupeClasses(classes[tags[i]]), clip, out)
	}
	return a.check(out, p, t), term
}

// tagWorlds gives each incoming world a fresh tag and a fresh scope, so the
// worlds in which a map body or a par branch completes pair up with the
// world they came from.
func (a *analyzer) tagWorlds(ws []*world) ([]int, []*world) {
	tags := make([]int, len(ws))
	out := make([]*world, len(ws))
	for i, w := range ws {
		a.nextTag++
		tags[i] = a.nextTag
		c := w.clone()
		c.tag = a.nextTag
		c.push()
		out[i] = c
	}
	return tags, out
}

// unknownItem is the item type of a map whose over selector selects no
// declared array: the map reports that, and its body's item selectors are
// not checked against it.
var unknownItem = &graph.PayloadType{Kind: graph.PayloadNull}

// mapItemType types the map's over selector and returns the type of one
// item: the selected array's items, or unknownItem.
func (a *analyzer) mapItemType(t *graph.Map, p graph.Path, ws []*world, sc scope) *graph.PayloadType {
	op := p.With(graph.FieldSeg("over"))
	overT, ok := a.selectType(op, ws, sc, t.Over)
	if ok {
		if overT.Kind == graph.PayloadArray && overT.Items != nil {
			it := *overT.Items
			return &it
		}
		a.emit(graph.CodeSchemaSafety, op, []string{t.Name}, "map over selector does not select an array")
	}
	return unknownItem
}

// checkMapPromotion checks one promoted path pp of a map (at pth): the body
// writes it once per item, the map state declares it as an array (the body
// writes one element of it per item), and the array of the values the body
// writes there is a subtype of the enclosing state's type at pp.
func (a *analyzer) checkMapPromotion(t *graph.Map, pth graph.Path, pp graph.FieldPath, sc scope) {
	elems, written := a.bodyElements(t.Body, pp)
	if !written {
		a.emit(graph.CodeUndefinedRead, pth, nil, "map promoted path has no indexed body write")
		return
	}
	if own, declared, _ := typeAt(t.State, pp); declared && (own.Kind != graph.PayloadArray || own.Items == nil) {
		a.emit(graph.CodeSchemaSafety, pth, []string{t.Name}, "map promoted path is not an array in the map state")
		return
	}
	_, outer, ok := a.promotionTypes(pth, t.State, pp, sc)
	if !ok {
		return
	}
	for _, e := range elems {
		arr := graph.PayloadType{Kind: graph.PayloadArray, Items: &e}
		if !graph.IsSubtype(arr, outer) {
			a.emit(graph.CodeSchemaSafety, pth, nil, "promoted value is not a subtype of its enclosing state target")
			return
		}
	}
}

// bodyElements returns the types a map body writes to pp for one item: the
// values of an executable's write bindings targeting pp, or a group body's
// declared state type at pp when it promotes pp. written is false when the
// body writes pp nowhere.
func (a *analyzer) bodyElements(body graph.Node, pp graph.FieldPath) (elems []graph.PayloadType, written bool) {
	if wbs, ok := writeBindings(body); ok {
		for _, wb := range wbs {
			if slices.Equal(wb.Target, pp) {
				written = true
				if vt, ok := a.channelType(wb.Value); ok {
					elems = append(elems, vt)
				}
			}
		}
		return elems, written
	}
	st, _ := groupState(body)
	for _, bp := range groupPromoted(body) {
		if slices.Equal(bp, pp) {
			written = true
			if et, ok, _ := typeAt(st, pp); ok {
				elems = append(elems, et)
			}
		}
	}
	return elems, written
}

// insideControls is the part of w's controls that belongs to nodes inside
// map mapName: one body outcome class.
func (a *analyzer) insideControls(w *world, mapName string) map[string]string {
	cl := map[string]string{}
	a.m.charge(1 + len(w.ctl))
	for k, v := range w.ctl {
		if a.isInside(k, mapName) {
			cl[k] = v
		}
	}
	return cl
}

// mapOutcomes appends the outcomes of map t from incoming world w: overflow,
// and ok either once (when no guard reads inside the map) or once per
// multiset of body outcome classes cls with at most clip items per class and
// at most maxItems items in all.
func (a *analyzer) mapOutcomes(t *graph.Map, p graph.Path, w *world, cls []map[string]string, clip int, out []*world) []*world {
	base := w.clone()
	for k := range a.insideControls(base, t.Name) {
		base.set(k, "")
	}
	out = append(out, a.mapOutcome(t, base, "", "overflow"))
	if !a.hasAggReaders(t.Name) || len(cls) == 0 {
		return append(out, a.mapOutcome(t, base, "", "ok"))
	}
	total := 1
	for range cls {
		total *= clip + 1
		if total > graph.MaxFiniteCheckAssignments {
			panic(assignmentCeiling(p, t.Name))
		}
	}
	counts := make([]int, len(cls))
	for {
		a.spend(1, p, t)
		if enc, ok := a.aggregate(cls, counts, t.MaxItems); ok {
			out = append(out, a.mapOutcome(t, base, enc, "ok"))
		}
		if !nextCounts(counts, clip) {
			return out
		}
	}
}

// mapOutcome is base with the map's aggregate (when something reads it),
// its overflow control (when some guard reads it) and its promoted paths.
func (a *analyzer) mapOutcome(t *graph.Map, base *world, agg, overflow string) *world {
	o := base.clone()
	if agg != "" && a.hasAggReaders(t.Name) {
		o.set(aggKey(t.Name), agg)
	}
	if ovKey := t.Name + "|g"; a.relevant[ovKey] {
		o.set(ovKey, overflow)
	}
	for _, pp := range t.PromotedStatePaths {
		o.top()[pathString(pp)] = true
	}
	return o
}

// aggregate encodes the multiset holding counts[j] items of class cls[j];
// ok is false when it holds more than maxItems items.
func (a *analyzer) aggregate(cls []map[string]string, counts []int, maxItems uint64) (string, bool) {
	sum := 0
	for _, c := range counts {
		sum += c
	}
	if uint64(sum) > maxItems {
		return "", false
	}
	var entries []aggEntry
	for j, c := range counts {
		if c > 0 {
			entries = append(entries, aggEntry{Class: cls[j], Count: c})
		}
	}
	if len(entries) == 0 {
		return "[]", true
	}
	b, _ := json.Marshal(entries)
	a.m.charge(len(b) / 16)
	return string(b), true
}

// nextCounts steps counts to the next tuple over 0..clip, first position
// fastest, and reports false after the last tuple.
func nextCounts(counts []int, clip int) bool {
	for j := range counts {
		counts[j]++
		if counts[j] <= clip {
			return true
		}
		counts[j] = 0
	}
	return false
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
