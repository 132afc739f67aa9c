package graph

import (
	"container/heap"
	"fmt"
	"sort"
)

// Result is the outcome of structural verification.
type Result struct {
	// OK is true when there are no error diagnostics.
	OK bool
	// Diagnostics are in CompareDiagnostics order; empty (not nil) when OK.
	Diagnostics []Diagnostic
	// Bounds is set only when OK.
	Bounds *Bounds
}

// Structural runs the structural passes of the verifier on a
// decoded graph: duplicate node names, profile shape, quorum shape, the
// ceilings, reference cycles, and the bounds folds with the termination
// witness. An approve-all backend admits exactly the graphs for which
// Result.OK holds; the flow-analysing verifier runs after it.
func Structural(g *GraphSpec) Result {
	diags := structuralDiagnostics(g)
	if len(diags) == 0 {
		b, more := computeBounds(g)
		if len(more) == 0 {
			return Result{OK: true, Diagnostics: []Diagnostic{}, Bounds: &b}
		}
		diags = more
	}
	SortDiagnostics(diags)
	return Result{Diagnostics: diags}
}

// ComputeBounds folds the bounds of a structurally sound graph. It
// returns the diagnostics that prevent bounds (reference cycles, fold
// ceilings); call it after the per-node structural checks (Structural does).
func ComputeBounds(g *GraphSpec) (Bounds, []Diagnostic) {
	return computeBounds(g)
}

func errorDiag(code DiagnosticCode, path Path, related []string, format string, args ...any) Diagnostic {
	if related == nil {
		related = []string{}
	}
	return Diagnostic{Severity: SeverityError, Code: code, Message: fmt.Sprintf(format, args...), Path: path, RelatedNodes: related}
}

func structuralDiagnostics(g *GraphSpec) []Diagnostic {
	if g == nil || g.Root == nil {
		return []Diagnostic{errorDiag(CodeInvalidGraphShape, Path{FieldSeg("root")}, nil, "graph has no root node")}
	}
	var diags []Diagnostic
	if g.Profile == ProfileSingleWorker && g.Root.NodeKind() != KindStep {
		diags = append(diags, errorDiag(CodeInvalidGraphShape, Path{FieldSeg("root")}, []string{g.Root.NodeName()},
			"profile %s requires a single step root, got %s", ProfileSingleWorker, g.Root.NodeKind()))
	}
	seen := map[string]bool{}
	nodes, guardNodes := 0, 0
	depthReported := false
	Walk(g, func(n Node, p Path, depth int) bool {
		nodes++
		name := n.NodeName()
		if seen[name] {
			diags = append(diags, errorDiag(CodeInvalidGraphShape, p, []string{name}, "duplicate node name %s", name))
		}
		seen[name] = true
		if depth > MaxGraphDepth && !depthReported {
			depthReported = true
			diags = append(diags, errorDiag(CodeCeilingExceeded, p, []string{name}, "graph depth exceeds the ceiling of %d", MaxGraphDepth))
		}
		for _, gd := range Guards(n) {
			guardNodes += gd.Size()
		}
		switch t := n.(type) {
		case *Step:
			diags = appendAttempts(diags, p, name, t.Attempts)
		case *Verifier:
			diags = appendAttempts(diags, p, name, t.Attempts)
		case *Loop:
			if t.MaxIterations > MaxLoopIterations {
				diags = append(diags, errorDiag(CodeCeilingExceeded, p.With(FieldSeg("maxIterations")), []string{name},
					"loop maxIterations %d exceeds the ceiling of %d", t.MaxIterations, MaxLoopIterations))
			}
		case *Map:
			if t.MaxItems > MaxMapItems {
				diags = append(diags, errorDiag(CodeCeilingExceeded, p.With(FieldSeg("maxItems")), []string{name},
					"map maxItems %d exceeds the ceiling of %d", t.MaxItems, MaxMapItems))
			}
		case *Par:
			if t.Join.Kind == JoinQuorum && t.Join.Count > uint64(len(t.Branches)) {
				diags = append(diags, errorDiag(CodeInvalidGraphShape, p.With(FieldSeg("join"), FieldSeg("count")), []string{name},
					"quorum count %d exceeds the %d parallel branches", t.Join.Count, len(t.Branches)))
			}
		}
		return true
	})
	if nodes > MaxGraphNodes {
		diags = append(diags, errorDiag(CodeCeilingExceeded, Path{FieldSeg("root")}, nil,
			"graph has %d nodes; the ceiling is %d", nodes, MaxGraphNodes))
	}
	if guardNodes > MaxGuardNodes {
		diags = append(diags, errorDiag(CodeCeilingExceeded, Path{FieldSeg("root")}, nil,
			"graph has %d guard nodes; the ceiling is %d", guardNodes, MaxGuardNodes))
	}
	return diags
}

func appendAttempts(diags []Diagnostic, p Path, name string, attempts uint64) []Diagnostic {
	if attempts > MaxAttemptsPerExecutable {
		diags = append(diags, errorDiag(CodeCeilingExceeded, p.With(FieldSeg("attempts")), []string{name},
			"attempts %d exceeds the ceiling of %d", attempts, MaxAttemptsPerExecutable))
	}
	return diags
}

// Saturating arithmetic keeps folds of hostile graphs from wrapping; any
// saturated value is far above every ceiling.
func satAdd(a, b uint64) uint64 {
	if a > MaxSafeInteger-b || b > MaxSafeInteger {
		return MaxSafeInteger
	}
	return a + b
}

func satMul(a, b uint64) uint64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > MaxSafeInteger/b {
		return MaxSafeInteger
	}
	return a * b
}

// fold is the per-subtree bound: executions, concurrency, loop entries.
type fold struct{ exec, conc, entries uint64 }

func maxU(a, b uint64) uint64 { return max(a, b) }

// foldAll combines the folds of ns member by member: exec with exec, conc
// with conc, entries with entries.
func foldAll(ns []Node, exec, conc, entries func(a, b uint64) uint64) fold {
	var f fold
	for _, c := range ns {
		cf := foldNode(c)
		f = fold{exec(f.exec, cf.exec), conc(f.conc, cf.conc), entries(f.entries, cf.entries)}
	}
	return f
}

// foldNode folds a subtree: a seq adds its children's executions and loop
// entries and takes their largest concurrency; a choice takes the largest of
// each over its alternatives; a par adds all three; a map multiplies its
// body's by maxItems; a loop multiplies its body's executions by
// maxIterations and counts one entry per iteration besides the body's.
func foldNode(n Node) fold {
	switch t := n.(type) {
	case *Step, *Verifier:
		return fold{exec: 1, conc: 1}
	case *Seq:
		return foldAll(t.Children, satAdd, maxU, satAdd)
	case *Choice:
		return foldAll(Children(t), maxU, maxU, maxU)
	case *Par:
		return foldAll(t.Branches, satAdd, satAdd, satAdd)
	case *Map:
		if t.Body == nil {
			return fold{}
		}
		bf := foldNode(t.Body)
		return fold{exec: satMul(t.MaxItems, bf.exec), conc: satMul(t.MaxItems, bf.conc), entries: satMul(t.MaxItems, bf.entries)}
	case *Loop:
		if t.Body == nil {
			return fold{}
		}
		bf := foldNode(t.Body)
		return fold{exec: satMul(t.MaxIterations, bf.exec), conc: bf.conc, entries: satMul(t.MaxIterations, satAdd(1, bf.entries))}
	}
	return fold{}
}

// located is a node with its diagnostic path.
type located struct {
	node Node
	path Path
}

func computeBounds(g *GraphSpec) (Bounds, []Diagnostic) {
	var b Bounds
	if g == nil || g.Root == nil {
		return b, structuralDiagnostics(g)
	}
	var nodes []located
	var loops []FieldPath
	b.AttemptsPerNode = map[string]uint64{}
	Walk(g, func(n Node, p Path, _ int) bool {
		nodes = append(nodes, located{n, p})
		switch t := n.(type) {
		case *Step:
			b.AttemptsPerNode[t.Name] = t.Attempts
		case *Verifier:
			b.AttemptsPerNode[t.Name] = t.Attempts
		case *Loop:
			loops = append(loops, FieldPath{t.Name})
		}
		return true
	})
	order, diags := referenceOrder(nodes)
	f := foldNode(g.Root)
	b.MaxNodeExecutions = max(1, f.exec)
	b.PeakConcurrency = max(1, f.conc)
	if len(loops) > 0 {
		b.Termination = Termination{Kind: TerminationBounded, Ranking: loops, MaxIterations: max(1, f.entries)}
	} else {
		b.Termination = Termination{Kind: TerminationAcyclic, Order: order}
	}
	return b, append(diags, f.ceilingDiagnostics()...)
}

// referenceOrder orders the nodes along the reference graph: an edge from
// every node whose output or control is read to the reader (containment is
// not an edge: a par's first join may read its own branch). It is Kahn's
// algorithm always taking the earliest ready node in authored pre-order, so
// simple graphs keep their pre-order. Nodes on a cycle stay unordered and
// each cycle is one cyclic_reference diagnostic.
func referenceOrder(nodes []located) ([]string, []Diagnostic) {
	idx := map[string]int{}
	for i, in := range nodes {
		if _, dup := idx[in.node.NodeName()]; !dup {
			idx[in.node.NodeName()] = i
		}
	}
	succ := make([][]int, len(nodes))
	indeg := make([]int, len(nodes))
	for i, in := range nodes {
		seen := map[int]bool{}
		for _, ref := range References(in.node) {
			j, ok := idx[ref]
			if !ok || j == i || seen[j] {
				continue
			}
			seen[j] = true
			succ[j] = append(succ[j], i)
			indeg[i]++
		}
	}
	ready := &intHeap{}
	for i := range nodes {
		if indeg[i] == 0 {
			heap.Push(ready, i)
		}
	}
	order := make([]string, 0, len(nodes))
	done := make([]bool, len(nodes))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		done[i] = true
		order = append(order, nodes[i].node.NodeName())
		for _, j := range succ[i] {
			if indeg[j]--; indeg[j] == 0 {
				heap.Push(ready, j)
			}
		}
	}
	var diags []Diagnostic
	if len(order) < len(nodes) {
		for _, scc := range cycles(succ, done) {
			names := make([]string, len(scc))
			for k, i := range scc {
				names[k] = nodes[i].node.NodeName()
			}
			sort.Strings(names)
			diags = append(diags, errorDiag(CodeCyclicReference, nodes[scc[0]].path, names,
				"node-output/control references contain a cycle"))
		}
	}
	return order, diags
}

// ceilingDiagnostics reports the folds of the whole graph that exceed their
// ceilings, at the root.
func (f fold) ceilingDiagnostics() []Diagnostic {
	var diags []Diagnostic
	root := Path{FieldSeg("root")}
	if f.exec > MaxExecutionsPerRun {
		diags = append(diags, errorDiag(CodeCeilingExceeded, root, nil,
			"maxNodeExecutions %d exceeds the ceiling of %d", f.exec, MaxExecutionsPerRun))
	}
	if f.entries > MaxLoopBodyEntries {
		diags = append(diags, errorDiag(CodeCeilingExceeded, root, nil,
			"loop-body entries %d exceed the ceiling of %d", f.entries, MaxLoopBodyEntries))
	}
	if f.conc > MaxPeakConcurrency {
		diags = append(diags, errorDiag(CodeCeilingExceeded, root, nil,
			"peakConcurrency %d exceeds the ceiling of %d", f.conc, MaxPeakConcurrency))
	}
	return diags
}

// cycles returns the strongly connected components (size > 1) among the
// nodes not yet ordered, each sorted by pre-order index, in order of their
// first member.
func cycles(succ [][]int, done []bool) [][]int {
	n := len(succ)
	index := make([]int, n)
	low := make([]int, n)
	on := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	var strong func(v int)
	strong = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		on[v] = true
		for _, w := range succ[v] {
			if done[w] {
				continue
			}
			if index[w] < 0 {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 {
				sort.Ints(comp)
				out = append(out, comp)
			}
		}
	}
	for v := 0; v < n; v++ {
		if !done[v] && index[v] < 0 {
			strong(v)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a][0] < out[b][0] })
	return out
}

type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// StructuralChecks returns the per-node structural diagnostics alone
// (duplicate names, profile and quorum shape, depth/node/guard/attempt/
// iteration/item ceilings), in CompareDiagnostics order, without the reference-cycle
// and fold diagnostics of ComputeBounds. The flow-analysing verifier runs
// its analysis only when this is empty.
func StructuralChecks(g *GraphSpec) []Diagnostic {
	ds := structuralDiagnostics(g)
	SortDiagnostics(ds)
	return ds
}
