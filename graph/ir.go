package graph

// TerminationKind tags a TerminationWitness.
type TerminationKind string

// Termination witness kinds.
const (
	TerminationAcyclic TerminationKind = "acyclic"
	TerminationBounded TerminationKind = "bounded"
)

// Termination is the termination witness: an acyclic order of every node,
// or, when the graph has loops, the loop ranking (outer to inner) and the
// total loop-entry fold.
type Termination struct {
	Kind          TerminationKind
	Order         []string    // acyclic
	Ranking       []FieldPath // bounded
	MaxIterations uint64      // bounded
}

// Bounds is StructuralBounds, order termination, maxNodeExecutions,
// peakConcurrency, attemptsPerNode.
type Bounds struct {
	Termination       Termination
	MaxNodeExecutions uint64
	PeakConcurrency   uint64
	AttemptsPerNode   map[string]uint64 // executable name -> attempts
}

// MarshalJSON writes the bounds in reference order.
func (b Bounds) MarshalJSON() ([]byte, error) { return marshal(&b) }

func (b *Bounds) writeJSON(w *jsonWriter) {
	w.open()
	w.member("termination")
	w.open()
	w.strMember("kind", string(b.Termination.Kind))
	if b.Termination.Kind == TerminationBounded {
		w.pathsMember("ranking", b.Termination.Ranking)
		w.uintMember("maxIterations", b.Termination.MaxIterations)
	} else {
		w.member("order")
		w.strings(b.Termination.Order)
	}
	w.close()
	w.uintMember("maxNodeExecutions", b.MaxNodeExecutions)
	w.uintMember("peakConcurrency", b.PeakConcurrency)
	w.member("attemptsPerNode")
	w.open()
	for _, k := range sortedKeys(b.AttemptsPerNode) {
		w.uintMember(k, b.AttemptsPerNode[k])
	}
	w.close()
	w.close()
}

// IR is CompiledGraphIr: the verified graph plus its bounds.
type IR struct {
	Spec   *GraphSpec
	Bounds Bounds
}

// MarshalJSON writes {profile, initialInput, policy, root, bounds} in
// reference order.
func (ir IR) MarshalJSON() ([]byte, error) { return marshal(&ir) }

func (ir *IR) writeJSON(w *jsonWriter) { w.graph(ir.Spec, &ir.Bounds) }

// CompiledIR encodes the compiled IR of g with bounds b, as the verifier
// returns it (`compiledIr`): the graph as decoded (not normalised) plus
// `bounds`, reference field order.
func CompiledIR(g *GraphSpec, b Bounds) ([]byte, error) {
	return (&IR{Spec: g, Bounds: b}).MarshalJSON()
}

// DecodeIR strictly decodes a CompiledGraphIr document.
func DecodeIR(data []byte) (*IR, error) { return decodeDocument(data, decodeIR) }

func decodeIR(v any, path string) (*IR, error) {
	r := openClosed(v, path, "compiled IR", ViolationInvalidType, ViolationUnknownField, "profile", "initialInput", "policy", "root", "bounds")
	r.what = "graph"
	g, err := decodeGraphFields(r)
	if err != nil {
		return nil, err
	}
	r.what = "compiled IR"
	b := member(r, "bounds", decodeBounds)
	if r.err != nil {
		return nil, r.err
	}
	return &IR{Spec: g, Bounds: b}, nil
}

func decodeBounds(v any, path string) (Bounds, error) {
	r := openClosed(v, path, "bounds", ViolationInvalidType, ViolationUnknownField, "termination", "maxNodeExecutions", "peakConcurrency", "attemptsPerNode")
	return Bounds{
		Termination:       member(r, "termination", decodeTermination),
		MaxNodeExecutions: r.positive("maxNodeExecutions", "maxNodeExecutions"),
		PeakConcurrency:   r.positive("peakConcurrency", "peakConcurrency"),
		AttemptsPerNode:   member(r, "attemptsPerNode", decodeAttempts),
	}, r.err
}

func decodeAttempts(v any, path string) (map[string]uint64, error) {
	return decodeNameMap(v, path, "attemptsPerNode", "attemptsPerNode key %q is not a node name", named("attempts", decodePositive))
}

// decodeTermination reads a termination witness: acyclic with the node
// order, or bounded with the loop ranking and the loop-entry fold.
func decodeTermination(v any, path string) (Termination, error) {
	r, kv, kind := openKind(v, path, "termination witness", " witness")
	t := Termination{Kind: TerminationKind(kind)}
	switch t.Kind {
	case TerminationAcyclic:
		r.only(ViolationUnknownField, "kind", "order")
		t.Order = member(r, "order", func(v any, p string) ([]string, error) {
			return decodeList(v, p, "witness order", true, named("node name", decodeIdentifier))
		})
	case TerminationBounded:
		r.only(ViolationUnknownField, "kind", "ranking", "maxIterations")
		t.Ranking = member(r, "ranking", func(v any, p string) ([]FieldPath, error) {
			if _, err := asList(v, p, "witness ranking", true); err != nil {
				return nil, err
			}
			return decodeFieldPaths(v, p, "witness ranking")
		})
		t.MaxIterations = r.positive("maxIterations", "maxIterations")
	default:
		r.fail("kind", ViolationInvalidValue, "unknown termination witness kind %s (expected acyclic or bounded)", quoteAny(kv))
	}
	return t, r.err
}
