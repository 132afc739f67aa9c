package verifier

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/oecp/oecp/graph"
)

// Result statuses.
const (
	StatusVerified = "verified"
	StatusRejected = "rejected"
)

// Result is the verifier's answer. Diagnostics are never nil and in
// diagnostic order (by path, code rank, message, related nodes). Bounds and
// CompiledIR are set only when Status is verified; CompiledIR is the decoded
// graph plus bounds in canonical field order.
type Result struct {
	Status      string
	Diagnostics []graph.Diagnostic
	Bounds      *graph.Bounds
	CompiledIR  json.RawMessage
}

// OK reports whether the graph was verified.
func (r Result) OK() bool { return r.Status == StatusVerified }

// MarshalJSON writes the verifier's answer as JSON:
// {"status","diagnostics"} plus "compiledIr" when verified.
func (r Result) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"status":`)
	st, _ := json.Marshal(r.Status)
	b.Write(st)
	b.WriteString(`,"diagnostics":[`)
	for i, d := range r.Diagnostics {
		if i > 0 {
			b.WriteByte(',')
		}
		db, err := d.MarshalJSON()
		if err != nil {
			return nil, err
		}
		b.Write(db)
	}
	b.WriteByte(']')
	if r.Status == StatusVerified && len(r.CompiledIR) > 0 {
		b.WriteString(`,"compiledIr":`)
		b.Write(r.CompiledIR)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Verifier is the production graph verifier over a worker registry. It is
// immutable and safe for concurrent use.
type Verifier struct {
	reg Registry
}

// New returns a verifier that resolves workers through reg (nil: every
// worker is not found).
func New(reg Registry) *Verifier { return &Verifier{reg: reg} }

// Verify runs, in order: the structural passes (duplicate names, shapes,
// ceilings; any finding stops here), the bounds folds and reference cycles
// together with the flow analysis, and — only when all of that found
// nothing — worker resolution and compatibility. It never panics.
func (v *Verifier) Verify(g *graph.GraphSpec) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			res = reject([]graph.Diagnostic{diag(graph.CodeInvalidGraphShape, graph.Path{graph.FieldSeg("root")}, nil,
				"verifier internal error: %v", r)})
		}
	}()
	if g == nil || g.Root == nil {
		return reject([]graph.Diagnostic{diag(graph.CodeInvalidGraphShape, graph.Path{graph.FieldSeg("root")}, nil, "graph has no root node")})
	}
	if ds := graph.StructuralChecks(g); len(ds) > 0 {
		return reject(ds)
	}
	bounds, ds := graph.ComputeBounds(g)
	ds = append(ds, analyze(g)...)
	if len(ds) > 0 {
		return reject(ds)
	}
	if ds := CheckCompatibility(g, v.reg); len(ds) > 0 {
		return reject(ds)
	}
	ir, err := graph.CompiledIR(g, bounds)
	if err != nil {
		return reject([]graph.Diagnostic{diag(graph.CodeInvalidGraphShape, graph.Path{graph.FieldSeg("root")}, nil,
			"%s", fmt.Sprintf("compiled IR cannot be encoded: %v", err))})
	}
	return Result{Status: StatusVerified, Diagnostics: []graph.Diagnostic{}, Bounds: &bounds, CompiledIR: ir}
}

func reject(ds []graph.Diagnostic) Result {
	out := make([]graph.Diagnostic, len(ds))
	copy(out, ds)
	graph.SortDiagnostics(out)
	return Result{Status: StatusRejected, Diagnostics: out}
}
