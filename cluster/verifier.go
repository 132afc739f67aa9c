package cluster

import (
	"context"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
)

// Verifier admits graphs (plan, apply). It must not read cluster state.
// Returning an error is an internal failure (-32603, redacted); a
// rejection is a Verdict with OK false and diagnostics.
type Verifier interface {
	Verify(ctx context.Context, g *graph.GraphSpec) (Verdict, error)
}

// Verdict is a verifier's answer. Bounds is set iff OK; the graph identity
// that decides changed vs unchanged apply is computed from the graph and
// these bounds.
type Verdict struct {
	OK          bool
	Diagnostics []graph.Diagnostic
	Bounds      *graph.Bounds
}

// StructuralVerifier approves exactly the graphs graph.Structural accepts,
// with their folded bounds. It is the fixture's verifier (it approves the
// goldens' graph with the bounds they show) and a Backend's default.
type StructuralVerifier struct{}

// Verify runs graph.Structural.
func (StructuralVerifier) Verify(_ context.Context, g *graph.GraphSpec) (Verdict, error) {
	r := graph.Structural(g)
	return Verdict{OK: r.OK, Diagnostics: r.Diagnostics, Bounds: r.Bounds}, nil
}

// VerifierFunc adapts a function to Verifier.
type VerifierFunc func(ctx context.Context, g *graph.GraphSpec) (Verdict, error)

// Verify calls f.
func (f VerifierFunc) Verify(ctx context.Context, g *graph.GraphSpec) (Verdict, error) {
	return f(ctx, g)
}

// verify runs the verifier port; an internal failure is redacted.
func (b *Backend) verify(ctx context.Context, g *graph.GraphSpec) (Verdict, error) {
	v, err := b.verifier.Verify(ctx, g)
	if err != nil {
		b.cfg.Log.Error("graph verifier failed", "err", err)
		return Verdict{}, protocol.Internal("")
	}
	if v.Diagnostics == nil {
		v.Diagnostics = []graph.Diagnostic{}
	}
	if v.OK && v.Bounds == nil {
		b.cfg.Log.Error("graph verifier approved without bounds")
		return Verdict{}, protocol.Internal("")
	}
	return v, nil
}
