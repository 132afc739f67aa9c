package verifier

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/oecp/oecp/graph"
)

var errorCodes = RuntimeErrors

// maxAnalysisWork bounds the total number of (node, world) visits of one
// analysis, so nested loops and wide par/map enumerations cannot make a
// hostile graph expensive: 16 × the per-check assignment ceiling.
const maxAnalysisWork = 16 * graph.MaxFiniteCheckAssignments

// errCeiling aborts the analysis when a finite check would enumerate more
// than graph.MaxFiniteCheckAssignments control assignments.
type errCeiling struct{ d graph.Diagnostic }

// analyzer is the per-call state of the flow analysis.
type analyzer struct {
	g        *graph.GraphSpec
	nodes    map[string]graph.Node
	parent   map[string]graph.Node
	maps     map[string][]string // node -> enclosing map names, outer first
	relevant map[string]bool     // control variables some guard reads
	lastUse  map[string]int      // control variable -> pre-order index after which no guard reads it
	end      map[string]int      // node -> pre-order index of the last node of its subtree
	chanRead map[string]bool     // nodes whose channel another node reads
	clip     int                 // largest k_of_map/k_of_n count (>= 1)
	nextTag  int
	work     int // worlds visited so far, bounded by maxAnalysisWork
	diags    []graph.Diagnostic
	seen     map[string]bool
	aggCache map[string][]aggEntry
	m        *meter         // real-work budget shared by every world
	aggLastM map[string]int // memo of aggLast
	aggRdrM  map[string]bool
}

type aggEntry struct {
	Class map[string]string `json:"c"`
	Count int               `json:"n"`
}

func pathString(p graph.FieldPath) string { return strings.Join(p, ".") }

func ctlKey(s graph.ControlSelector) string {
	switch s.Source {
	case graph.ControlSignal:
		f := ""
		if s.Field != nil {
			f = *s.Field
		}
		return s.Name + "|s|" + f
	case graph.ControlError:
		return s.Name + "|e"
	}
	return s.Name + "|g"
}

func aggKey(mapName string) string { return mapName + "|agg" }

func (a *analyzer) emit(code graph.DiagnosticCode, p graph.Path, related []string, format string, args ...any) {
	d := diag(code, p, related, format, args...)
	b, _ := json.Marshal(d)
	k := string(b)
	if a.seen[k] {
		return
	}
	a.seen[k] = true
	a.diags = append(a.diags, d)
}

func (a *analyzer) check(ws []*world, p graph.Path, n graph.Node) []*world {
	ws = mergeWorlds(ws)
	if len(ws) > graph.MaxFiniteCheckAssignments {
		panic(assignmentCeiling(p, n.NodeName()))
	}
	return ws
}

// assignmentCeiling is the abort of a finite check at node name (path p)
// that would enumerate more than graph.MaxFiniteCheckAssignments control
// assignments.
func assignmentCeiling(p graph.Path, name string) errCeiling {
	return errCeiling{diag(graph.CodeCeilingExceeded, p, []string{name},
		"finite check exceeds the ceiling of %d control assignments", graph.MaxFiniteCheckAssignments)}
}

// analyze runs the flow analysis; it expects a structurally sound graph.
func analyze(g *graph.GraphSpec) (diags []graph.Diagnostic) {
	a := &analyzer{g: g, nodes: map[string]graph.Node{}, parent: map[string]graph.Node{}, maps: map[string][]string{},
		relevant: map[string]bool{}, lastUse: map[string]int{}, end: map[string]int{}, chanRead: map[string]bool{}, clip: 1, seen: map[string]bool{}, aggCache: map[string][]aggEntry{},
		m: &meter{}, aggLastM: map[string]int{}, aggRdrM: map[string]bool{}}
	a.index(g.Root, nil)
	pre := map[string]int{}
	a.number(g.Root, pre)
	outerLoop := outermostLoops(g)
	graph.Walk(g, func(n graph.Node, _ graph.Path, _ int) bool {
		a.scanReads(n, pre, outerLoop)
		return true
	})
	defer func() {
		if r := recover(); r != nil {
			if c, ok := r.(errCeiling); ok {
				diags = append(a.diags, c.d)
				return
			}
			panic(r)
		}
	}()
	start := &world{m: a.m, shared: true, ctl: map[string]string{}, scopes: []map[string]bool{{"": true}}, ran: map[string]bool{}, ok: map[string]bool{}}
	sc := scope{typ: g.InitialInput}
	rp := graph.RootPath(g)
	cont, _ := a.node(g.Root, rp, []*world{start}, sc)
	if len(cont) > 0 {
		a.emit(graph.CodeReachability, graph.Path{graph.FieldSeg("root")}, []string{g.Root.NodeName()},
			"normal-success path falls through without explicit succeed or fail terminal")
	}
	return a.diags
}

// index records every node of the subtree n by name, with its parent and
// its enclosing maps (outer first).
func (a *analyzer) index(n graph.Node, maps []string) {
	a.nodes[n.NodeName()] = n
	a.maps[n.NodeName()] = maps
	inner := maps
	if _, ok := n.(*graph.Map); ok {
		inner = append(slices.Clone(maps), n.NodeName())
	}
	for _, c := range graph.Children(n) {
		a.parent[c.NodeName()] = n
		a.index(c, inner)
	}
}

// number gives every node of the subtree n its pre-order index in pre and
// records in a.end the index of the last node of its subtree.
func (a *analyzer) number(n graph.Node, pre map[string]int) {
	pre[n.NodeName()] = len(pre)
	for _, c := range graph.Children(n) {
		a.number(c, pre)
	}
	a.end[n.NodeName()] = len(pre) - 1
}

// outermostLoops maps every node inside a loop to the outermost loop
// enclosing it.
func outermostLoops(g *graph.GraphSpec) map[string]string {
	outerLoop := map[string]string{}
	graph.Walk(g, func(n graph.Node, _ graph.Path, _ int) bool {
		if l, ok := n.(*graph.Loop); ok {
			for _, c := range graph.Children(l) {
				graph.Walk(&graph.GraphSpec{Root: c}, func(m graph.Node, _ graph.Path, _ int) bool {
					if _, set := outerLoop[m.NodeName()]; !set {
						outerLoop[m.NodeName()] = l.Name
					}
					return true
				})
			}
		}
		return true
	})
	return outerLoop
}

// scanReads records what node n reads: the controls its guards select
// (relevant, and the last pre-order index at which they are read: a loop or
// par guard runs after its body or branches, and anything inside a loop may
// run again until the outermost loop ends), the largest guard count, and
// the nodes whose output channels its write bindings read.
func (a *analyzer) scanReads(n graph.Node, pre map[string]int, outerLoop map[string]string) {
	use := pre[n.NodeName()]
	switch n.(type) {
	case *graph.Loop, *graph.Par:
		use = a.end[n.NodeName()]
	}
	if l, ok := outerLoop[n.NodeName()]; ok {
		use = max(use, a.end[l])
	}
	for _, gd := range graph.Guards(n) {
		for _, s := range gd.Selectors() {
			a.relevant[ctlKey(s)] = true
			a.lastUse[ctlKey(s)] = max(a.lastUse[ctlKey(s)], use)
		}
		a.scanCounts(gd)
	}
	wbs, _ := writeBindings(n)
	for _, b := range wbs {
		if b.Value.Node != n.NodeName() {
			a.chanRead[b.Value.Node] = true
		}
	}
}

// writeBindings returns the write bindings of an executable node; ok is
// false for any other node.
func writeBindings(n graph.Node) (wbs []graph.WriteBinding, ok bool) {
	switch t := n.(type) {
	case *graph.Step:
		return t.WriteBindings, true
	case *graph.Verifier:
		return t.WriteBindings, true
	}
	return nil, false
}

func (a *analyzer) scanCounts(g *graph.Guard) {
	switch g.Kind {
	case graph.GuardKOfMap, graph.GuardKOfN:
		if g.Count > uint64(a.clip) && g.Count <= graph.MaxMapItems {
			a.clip = int(g.Count)
		}
	}
	for i := range g.Guards {
		a.scanCounts(&g.Guards[i])
	}
	if g.Inner != nil {
		a.scanCounts(g.Inner)
	}
}

// scope is the static typing context of a node: the state type of the scope
// it reads and writes, the innermost map item type, and the promoted paths
// of a map whose body this node is (writes to them hold one element).
type scope struct {
	typ        graph.PayloadType
	item       *graph.PayloadType
	mapPromote []graph.FieldPath
	group      string // enclosing group name
}

// typeAt walks t along path; ok is false when a segment is not declared;
// req is true when every segment is a required field.
func typeAt(t graph.PayloadType, path graph.FieldPath) (graph.PayloadType, bool, bool) {
	req := true
	for _, seg := range path {
		if t.Kind != graph.PayloadRecord {
			return t, false, false
		}
		f, ok := t.Fields[seg]
		if !ok {
			return t, false, false
		}
		req = req && f.Required
		t = f.Type
	}
	return t, true, req
}

func defined(set map[string]bool, t graph.PayloadType, p graph.FieldPath) bool {
	for k := len(p); k >= 0; k-- {
		if !set[pathString(p[:k])] {
			continue
		}
		base, ok, _ := typeAt(t, p[:k])
		if !ok && k > 0 {
			// Written but not declared: only the exact path is known.
			if k == len(p) {
				return true
			}
			continue
		}
		if _, ok, req := typeAt(base, p[k:]); ok && req {
			return true
		}
	}
	return false
}

// node analyses n over the worlds ws reaching it and returns the worlds in
// which it completes normally, and whether some world reached a terminal.
func (a *analyzer) node(n graph.Node, p graph.Path, ws []*world, sc scope) ([]*world, bool) {
	outerPath, outerNode := a.m.path, a.m.node
	a.m.path, a.m.node = p, n
	defer func() { a.m.path, a.m.node = outerPath, outerNode }()
	ws = a.check(ws, p, n)
	a.spend(len(ws)+1, p, n)
	switch t := n.(type) {
	case *graph.Step:
		return a.executable(n, p, ws, sc, t.Input, t.InputBindings, t.WriteBindings, nil), false
	case *graph.Verifier:
		return a.executable(n, p, ws, sc, t.Input, t.InputBindings, t.WriteBindings, t.Signals), false
	case *graph.Succeed:
		a.construct(p, ws, sc, t.Output, t.Bindings, "output", "bindings")
		return nil, true
	case *graph.Fail:
		return nil, true
	case *graph.Seq:
		inner := a.enterGroup(n, p, t.State, sc)
		cur := pushAll(ws)
		term := false
		for i, c := range t.Children {
			cp := p.With(graph.FieldSeg("children"), graph.IndexSeg(i), graph.NodeSeg(c.NodeName()))
			var tm bool
			cur, tm = a.node(c, cp, cur, inner)
			term = term || tm
			cur = a.forget(cur, a.end[c.NodeName()], p, n)
		}
		return a.exitGroup(n, p, t.State, t.PromotedStatePaths, cur, sc), term
	case *graph.Choice:
		return a.choice(t, p, ws, sc)
	case *graph.Loop:
		return a.loop(t, p, ws, sc)
	case *graph.Map:
		return a.mapNode(t, p, ws, sc)
	case *graph.Par:
		return a.par(t, p, ws, sc)
	}
	return nil, false
}

// forget drops the controls no guard reads after pre-order index at, so
// worlds that differ only in dead controls merge.
func (a *analyzer) forget(ws []*world, at int, p graph.Path, n graph.Node) []*world {
	dropped := false
	for _, w := range ws {
		a.m.charge(1 + len(w.ctl))
		var drop []string
		for k := range w.ctl {
			last, ok := a.lastUse[k]
			if !ok {
				if i := strings.Index(k, "|agg"); i >= 0 {
					last = a.aggLast(k[:i])
					ok = true
				}
			}
			if ok && last < at {
				drop = append(drop, k)
			}
		}
		for _, k := range drop {
			w.set(k, "")
			dropped = true
		}
	}
	if !dropped {
		return ws
	}
	return a.check(ws, p, n)
}

// aggLast is the last use of any control inside map m.
func (a *analyzer) aggLast(m string) int {
	if v, ok := a.aggLastM[m]; ok {
		return v
	}
	a.m.charge(1 + len(a.lastUse))
	last := -1
	for k, u := range a.lastUse {
		if a.isInside(k, m) {
			last = max(last, u)
		}
	}
	a.aggLastM[m] = last
	return last
}

// spend charges k units of work and aborts past maxAnalysisWork.
func (a *analyzer) spend(k int, p graph.Path, n graph.Node) {
	a.work += k
	if a.work > maxAnalysisWork {
		panic(errCeiling{diag(graph.CodeCeilingExceeded, p, []string{n.NodeName()},
			"flow analysis exceeds its work ceiling of %d world visits", maxAnalysisWork)})
	}
}

func pushAll(ws []*world) []*world {
	out := make([]*world, len(ws))
	for i, w := range ws {
		c := w.clone()
		c.push()
		out[i] = c
	}
	return out
}

func (a *analyzer) enterGroup(n graph.Node, p graph.Path, state graph.PayloadType, sc scope) scope {
	if sc.mapPromote == nil && !graph.IsSubtype(sc.typ, state) {
		a.emit(graph.CodeSchemaSafety, p.With(graph.FieldSeg("state")), []string{n.NodeName()},
			"incoming state is not a subtype of the group state")
	}
	return scope{typ: state, item: sc.item, group: n.NodeName()}
}

// exitGroup checks promotions on the completing worlds, pops the group scope
// and adds the promoted paths to the parent scope.
func (a *analyzer) exitGroup(n graph.Node, p graph.Path, state graph.PayloadType, promoted []graph.FieldPath, ws []*world, sc scope) []*world {
	for i, pp := range promoted {
		pth := p.With(graph.FieldSeg("promotedStatePaths"), graph.IndexSeg(i))
		if !a.checkPromotedTypes(pth, state, pp, sc) {
			continue // undeclared in the group state: whether it is defined is moot
		}
		for _, w := range ws {
			a.m.charge(1 + len(pp))
			if !defined(w.top(), state, pp) {
				a.emit(graph.CodeUndefinedRead, pth, nil, "promoted path is not defined by every completing alternative")
				break
			}
		}
	}
	for _, w := range ws {
		a.m.charge(1 + len(promoted))
		w.pop()
		for _, pp := range promoted {
			w.top()[pathString(pp)] = true
		}
	}
	return ws
}

// checkPromotedTypes checks that the group state's type at promoted path pp
// (at pth) is a subtype of the enclosing state's, and returns whether the
// group state declares pp.
func (a *analyzer) checkPromotedTypes(pth graph.Path, state graph.PayloadType, pp graph.FieldPath, sc scope) bool {
	inner, outer, ok := a.promotionTypes(pth, state, pp, sc)
	if ok && !graph.IsSubtype(inner, outer) {
		a.emit(graph.CodeSchemaSafety, pth, nil, "promoted value is not a subtype of its enclosing state target")
	}
	_, declared, _ := typeAt(state, pp)
	return declared
}

// promotionTypes returns the type of promoted path pp (at pth) in the group
// state and in the enclosing scope sc; ok is false, and the missing
// declaration reported, when either does not declare it.
func (a *analyzer) promotionTypes(pth graph.Path, state graph.PayloadType, pp graph.FieldPath, sc scope) (inner, outer graph.PayloadType, ok bool) {
	inner, ok, _ = typeAt(state, pp)
	if !ok {
		a.emit(graph.CodeSchemaSafety, pth, nil, "promoted path is not declared in the group state")
		return inner, outer, false
	}
	outer, ok, mapFault := a.targetType(sc, pp)
	if !ok && !mapFault {
		a.emit(graph.CodeSchemaSafety, pth, nil, "promoted path is not declared in the enclosing state")
	}
	return inner, outer, ok
}

// targetType is the type a write to path holds in scope sc: the declared
// type, or one element when path is a promoted path of the enclosing map.
// ok is false when sc does not declare path (or declares a promoted path
// of the enclosing map with a non-array type); mapFault tells that second
// case, which the map reports, so the write itself is not reported.
func (a *analyzer) targetType(sc scope, path graph.FieldPath) (t graph.PayloadType, ok, mapFault bool) {
	t, ok, _ = typeAt(sc.typ, path)
	if !ok {
		return t, false, false
	}
	for _, mp := range sc.mapPromote {
		if slices.Equal(mp, path) {
			if t.Kind != graph.PayloadArray || t.Items == nil {
				return t, false, true
			}
			return *t.Items, true, false
		}
	}
	return t, true, false
}

// selectType types a data selector and checks it is defined in every world.
func (a *analyzer) selectType(p graph.Path, ws []*world, sc scope, s graph.DataSelector) (graph.PayloadType, bool) {
	if s.Source == graph.SourceItem {
		if sc.item == nil {
			a.emit(graph.CodeInvalidGraphShape, p, nil, "item selector is used outside a map body")
			return graph.PayloadType{}, false
		}
		if sc.item == unknownItem {
			return graph.PayloadType{}, false
		}
		t, ok, req := typeAt(*sc.item, s.Path)
		if !ok {
			a.emit(graph.CodeSchemaSafety, p, nil, "selector path is not declared by the map item type")
			return t, false
		}
		if !req {
			a.emit(graph.CodeUndefinedRead, p, nil, "selector path is not definitely defined on every reaching path")
		}
		return t, true
	}
	t, ok, _ := typeAt(sc.typ, s.Path)
	if !ok {
		a.emit(graph.CodeSchemaSafety, p, nil, "selector path is not declared by the state type")
		return t, false
	}
	for _, w := range ws {
		a.m.charge(1 + len(s.Path))
		if !defined(w.top(), sc.typ, s.Path) {
			a.emit(graph.CodeUndefinedRead, p, nil, "selector path is not definitely defined on every reaching path")
			break
		}
	}
	return t, true
}

// construct checks an executable input or succeed output built from field
// bindings: a null payload takes no bindings; any other payload must be a
// record whose required fields the bindings construct.
func (a *analyzer) construct(p graph.Path, ws []*world, sc scope, typ graph.PayloadType, bs []graph.InputBinding, typeField, bindField string) {
	switch typ.Kind {
	case graph.PayloadNull:
		if len(bs) > 0 {
			a.emit(graph.CodeSchemaSafety, p.With(graph.FieldSeg(typeField)), nil, "field bindings cannot construct a null payload")
		}
	case graph.PayloadRecord:
	default:
		a.emit(graph.CodeSchemaSafety, p.With(graph.FieldSeg(typeField)), nil,
			"v1 field bindings cannot construct a whole non-record payload; use null or record")
		return
	}
	targets := map[string]bool{}
	for i, b := range bs {
		bp := p.With(graph.FieldSeg(bindField), graph.IndexSeg(i))
		targets[pathString(b.Target)] = true
		src, ok := a.selectType(bp.With(graph.FieldSeg("value")), ws, sc, b.Value)
		if typ.Kind != graph.PayloadRecord {
			continue
		}
		dst, tok, _ := typeAt(typ, b.Target)
		if !tok {
			a.emit(graph.CodeSchemaSafety, bp, nil, "binding target is not declared by the payload type")
			continue
		}
		if ok && !graph.IsSubtype(src, dst) {
			a.emit(graph.CodeSchemaSafety, bp, nil, "binding source is not a subtype of its target")
		}
	}
	if typ.Kind == graph.PayloadRecord && len(bs) > 0 {
		for _, f := range sortedKeys(typ.Fields) {
			if typ.Fields[f].Required && !coveredField(targets, f) {
				a.emit(graph.CodeSchemaSafety, p.With(graph.FieldSeg(typeField)), nil, "bindings do not construct required field %s", f)
			}
		}
	}
}

func coveredField(targets map[string]bool, f string) bool {
	for t := range targets {
		if t == f || strings.HasPrefix(t, f+".") {
			return true
		}
	}
	return false
}
