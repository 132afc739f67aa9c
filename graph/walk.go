package graph

// Children returns the direct child nodes of n in authored order: seq
// children, choice branch nodes then otherwise, par branches, loop/map body.
func Children(n Node) []Node {
	var out []Node
	eachChild(n, nil, func(c Node, _ Path) { out = append(out, c) })
	return out
}

// eachChild calls fn for every direct child of n with its diagnostic path,
// built from parent (see Walk).
func eachChild(n Node, parent Path, fn func(c Node, p Path)) {
	switch t := n.(type) {
	case *Seq:
		for i, c := range t.Children {
			if c != nil {
				fn(c, parent.With(FieldSeg("children"), IndexSeg(i), NodeSeg(c.NodeName())))
			}
		}
	case *Choice:
		for i, b := range t.Branches {
			if b.Node != nil {
				fn(b.Node, parent.With(FieldSeg("branches"), IndexSeg(i), FieldSeg("node"), NodeSeg(b.Node.NodeName())))
			}
		}
		if t.Otherwise != nil {
			fn(t.Otherwise, parent.With(FieldSeg("otherwise"), NodeSeg(t.Otherwise.NodeName())))
		}
	case *Par:
		for i, c := range t.Branches {
			if c != nil {
				fn(c, parent.With(FieldSeg("branches"), IndexSeg(i), NodeSeg(c.NodeName())))
			}
		}
	case *Loop:
		if t.Body != nil {
			fn(t.Body, parent.With(FieldSeg("body"), NodeSeg(t.Body.NodeName())))
		}
	case *Map:
		if t.Body != nil {
			fn(t.Body, parent.With(FieldSeg("body"), NodeSeg(t.Body.NodeName())))
		}
	}
}

// RootPath is the diagnostic path of the root node: field root, node name.
func RootPath(g *GraphSpec) Path {
	if g == nil || g.Root == nil {
		return Path{FieldSeg("root")}
	}
	return Path{FieldSeg("root"), NodeSeg(g.Root.NodeName())}
}

// Walk visits every node of g in authored pre-order with its diagnostic
// path (as the reference verifier writes it: field root, node root, field
// children, index 0, node name, ...) and depth (the root is 1). When fn
// returns false the node's subtree is skipped.
func Walk(g *GraphSpec, fn func(n Node, path Path, depth int) bool) {
	if g == nil || g.Root == nil {
		return
	}
	var visit func(n Node, p Path, depth int)
	visit = func(n Node, p Path, depth int) {
		if !fn(n, p, depth) {
			return
		}
		eachChild(n, p, func(c Node, cp Path) { visit(c, cp, depth+1) })
	}
	visit(g.Root, RootPath(g), 1)
}

// Guards returns the guards a node evaluates itself: choice branch guards,
// the loop until guard, the par first-join guard.
func Guards(n Node) []*Guard {
	var out []*Guard
	switch t := n.(type) {
	case *Choice:
		for i := range t.Branches {
			out = append(out, &t.Branches[i].When)
		}
	case *Loop:
		if t.Until != nil {
			out = append(out, t.Until)
		}
	case *Par:
		if t.Join.Kind == JoinFirst && t.Join.When != nil {
			out = append(out, t.Join.When)
		}
	}
	return out
}

// Selectors returns every control selector of the guard, depth first.
func (g *Guard) Selectors() []ControlSelector {
	var out []ControlSelector
	var visit func(g *Guard)
	visit = func(g *Guard) {
		switch g.Kind {
		case GuardIn, GuardKOfMap:
			if g.Value != nil {
				out = append(out, *g.Value)
			}
		case GuardKOfN:
			out = append(out, g.Values...)
		case GuardAll, GuardAny:
			for i := range g.Guards {
				visit(&g.Guards[i])
			}
		case GuardNot:
			if g.Inner != nil {
				visit(g.Inner)
			}
		}
	}
	visit(g)
	return out
}

// Size is the number of guard AST nodes (counted against MaxGuardNodes).
func (g *Guard) Size() int {
	n := 1
	for i := range g.Guards {
		n += g.Guards[i].Size()
	}
	if g.Inner != nil {
		n += g.Inner.Size()
	}
	return n
}

// References returns the names of the nodes whose output or control n reads
// itself (write-binding sources and guard control selectors), in authored
// order, possibly with repeats and including n's own name.
func References(n Node) []string {
	var out []string
	switch t := n.(type) {
	case *Step:
		for _, b := range t.WriteBindings {
			out = append(out, b.Value.Node)
		}
	case *Verifier:
		for _, b := range t.WriteBindings {
			out = append(out, b.Value.Node)
		}
	}
	for _, g := range Guards(n) {
		for _, s := range g.Selectors() {
			out = append(out, s.Name)
		}
	}
	return out
}
