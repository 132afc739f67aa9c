package verifier

import "github.com/oecp/oecp/graph"

// maxAnalysisOps bounds the real work of one flow analysis, counted in
// deterministic units: one per world entry copied, compared, hashed or
// intersected, per guard node evaluated, per control label resolved, per
// 16 bytes of aggregate encoding. It is what keeps a small hostile graph
// from taking seconds: the visit budget (maxAnalysisWork) alone does not,
// because one visit can cost as much as the worlds are large. Exhaustion
// is the ceiling_exceeded diagnostic, never a wall-clock timeout.
const maxAnalysisOps = 1 << 24

// meter counts the work units of one analysis. It is shared by every world
// of that analysis; a nil meter is unmetered.
type meter struct {
	ops  int
	path graph.Path // node being analysed, for the ceiling diagnostic
	node graph.Node
}

// charge adds k units and aborts the analysis past maxAnalysisOps.
func (m *meter) charge(k int) {
	if m == nil {
		return
	}
	m.ops += k
	if m.ops > maxAnalysisOps {
		m.ops = maxAnalysisOps + 1
		p := m.path
		if p == nil {
			p = graph.Path{graph.FieldSeg("root")}
		}
		var related []string
		if m.node != nil {
			related = []string{m.node.NodeName()}
		}
		panic(errCeiling{diag(graph.CodeCeilingExceeded, p, related,
			"flow analysis exceeds its work ceiling of %d operations", maxAnalysisOps)})
	}
}
