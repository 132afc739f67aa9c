package verifier

import (
	"errors"
	"fmt"
	"slices"

	"github.com/oecp/oecp/graph"
)

// CheckCompatibility resolves every step and verifier worker of g through
// reg, in pre-order, by exact reference (no latest-version or name-only
// fallback), and checks each descriptor against its node. Look-up,
// descriptor, identity, profile and step/verifier-kind failures are
// invalid_graph_shape; type failures are schema_safety. The result is in
// diagnostic order.
func CheckCompatibility(g *graph.GraphSpec, reg Registry) []graph.Diagnostic {
	diags := []graph.Diagnostic{}
	if g == nil {
		return diags
	}
	graph.Walk(g, func(n graph.Node, p graph.Path, _ int) bool {
		switch n.(type) {
		case *graph.Step, *graph.Verifier:
			diags = append(diags, checkNode(g, n, p, reg)...)
		}
		return true
	})
	graph.SortDiagnostics(diags)
	return diags
}

func resolveSafely(reg Registry, ref string, n graph.Node) (d *Descriptor, err error) {
	defer func() {
		if r := recover(); r != nil {
			d, err = nil, fmt.Errorf("%w: %s (registry failure)", ErrWorkerNotFound, ref)
		}
	}()
	if reg == nil {
		return nil, fmt.Errorf("%w: %s", ErrWorkerNotFound, ref)
	}
	return reg.Resolve(ref, n)
}

func checkNode(g *graph.GraphSpec, n graph.Node, p graph.Path, reg Registry) []graph.Diagnostic {
	var out []graph.Diagnostic
	name := n.NodeName()
	add := func(code graph.DiagnosticCode, format string, args ...any) {
		out = append(out, diag(code, p, []string{name}, format, args...))
	}
	var ref string
	var in, outT graph.PayloadType
	var vnode *graph.Verifier
	switch t := n.(type) {
	case *graph.Step:
		ref, in, outT = t.Worker, t.Input, t.Output
	case *graph.Verifier:
		ref, in, outT, vnode = t.Worker, t.Input, t.Output, t
	}
	d, err := resolveSafely(reg, ref, n)
	if err != nil || d == nil {
		if errors.Is(err, ErrWorkerVersionUnavailable) {
			add(graph.CodeInvalidGraphShape, "worker descriptor version is unavailable: %s", ref)
		} else {
			add(graph.CodeInvalidGraphShape, "worker descriptor not found: %s", ref)
		}
		return out
	}
	if err := d.Validate(); err != nil {
		add(graph.CodeInvalidGraphShape, "invalid resolved descriptor: %s", err.Error())
		return out
	}
	if d.Worker != ref {
		add(graph.CodeInvalidGraphShape, "registry returned descriptor %s for requested %s", d.Worker, ref)
	}
	if !slices.Contains(d.GraphProfiles, g.Profile) {
		add(graph.CodeInvalidGraphShape, "descriptor does not allow graph profile %s", g.Profile)
	}
	if !graph.IsSubtype(in, d.Contract.Input) {
		add(graph.CodeSchemaSafety, "graph input is not a subtype of descriptor input")
	}
	if !graph.IsSubtype(d.Contract.Output, outT) {
		add(graph.CodeSchemaSafety, "descriptor output is not a subtype of graph output")
	}
	if vnode == nil {
		if d.Contract.Verifier != nil {
			add(graph.CodeInvalidGraphShape, "step node resolved to a verifier-only descriptor")
		}
		return out
	}
	vc := d.Contract.Verifier
	if vc == nil {
		add(graph.CodeInvalidGraphShape, "verifier node resolved to a non-verifier descriptor")
		return out
	}
	for _, f := range sortedKeys(vc.Signals) {
		labels, ok := vnode.Signals[f]
		if !ok {
			add(graph.CodeSchemaSafety, "descriptor signal %s is absent from graph declaration", f)
			continue
		}
		for _, l := range vc.Signals[f] {
			if !slices.Contains(labels, l) {
				add(graph.CodeSchemaSafety, "descriptor labels for signal %s exceed graph labels", f)
				break
			}
		}
	}
	if !graph.IsSubtype(vc.Diagnostic, vnode.Diagnostic) {
		add(graph.CodeSchemaSafety, "descriptor diagnostic is not a subtype of graph diagnostic")
	}
	return out
}

func diag(code graph.DiagnosticCode, p graph.Path, related []string, format string, args ...any) graph.Diagnostic {
	if related == nil {
		related = []string{}
	}
	return graph.Diagnostic{Severity: graph.SeverityError, Code: code, Message: fmt.Sprintf(format, args...), Path: p, RelatedNodes: related}
}
