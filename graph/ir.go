package graph

import (
	"sort"
)

// TerminationKind tags a TerminationWitness.
type TerminationKind string

// Termination witness kinds (§5.8).
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

// Bounds is StructuralBounds (§5.8), order termination, maxNodeExecutions,
// peakConcurrency, attemptsPerNode.
type Bounds struct {
	Termination       Termination
	MaxNodeExecutions uint64
	PeakConcurrency   uint64
	AttemptsPerNode   map[string]uint64 // executable name -> attempts
}

// MarshalJSON writes the bounds in reference order.
func (b Bounds) MarshalJSON() ([]byte, error) {
	w := &jsonWriter{}
	b.writeJSON(w)
	return w.b, nil
}

func (b *Bounds) writeJSON(w *jsonWriter) {
	w.raw(`{"termination":{"kind":`)
	w.str(string(b.Termination.Kind))
	if b.Termination.Kind == TerminationBounded {
		w.raw(`,"ranking":`)
		w.paths(b.Termination.Ranking)
		w.raw(`,"maxIterations":`)
		w.uint(b.Termination.MaxIterations)
	} else {
		w.raw(`,"order":`)
		w.strings(b.Termination.Order)
	}
	w.raw(`},"maxNodeExecutions":`)
	w.uint(b.MaxNodeExecutions)
	w.raw(`,"peakConcurrency":`)
	w.uint(b.PeakConcurrency)
	w.raw(`,"attemptsPerNode":{`)
	names := make([]string, 0, len(b.AttemptsPerNode))
	for k := range b.AttemptsPerNode {
		names = append(names, k)
	}
	sort.Strings(names)
	for i, k := range names {
		w.key(k, i == 0)
		w.uint(b.AttemptsPerNode[k])
	}
	w.raw("}}")
}

// IR is CompiledGraphIr (§6.2): the verified graph plus its bounds.
type IR struct {
	Spec   *GraphSpec
	Bounds Bounds
}

// MarshalJSON writes {profile, initialInput, policy, root, bounds} in
// reference order.
func (ir IR) MarshalJSON() ([]byte, error) {
	w := &jsonWriter{}
	w.graph(ir.Spec, &ir.Bounds)
	return w.b, nil
}

// CompiledIR encodes the compiled IR of g with bounds b, as the verifier
// returns it (`compiledIr`): the graph as decoded (not normalised) plus
// `bounds`, reference field order.
func CompiledIR(g *GraphSpec, b Bounds) ([]byte, error) {
	return (&IR{Spec: g, Bounds: b}).MarshalJSON()
}

// DecodeIR strictly decodes a CompiledGraphIr document.
func DecodeIR(data []byte) (*IR, error) {
	tree, err := parseJSON(data)
	if err != nil {
		return nil, errAt("$", ViolationMalformedJSON, "%v", err)
	}
	obj, err := asObject(tree, "$", "compiled IR", ViolationInvalidType)
	if err != nil {
		return nil, err
	}
	if err := closed(obj, "$", "compiled IR", ViolationUnknownField, "profile", "initialInput", "policy", "root", "bounds"); err != nil {
		return nil, err
	}
	g, err := decodeGraphFields(obj, "$")
	if err != nil {
		return nil, err
	}
	bv, err := need(obj, "bounds", "$", "compiled IR")
	if err != nil {
		return nil, err
	}
	b, err := decodeBounds(bv, "$.bounds")
	if err != nil {
		return nil, err
	}
	return &IR{Spec: g, Bounds: b}, nil
}

func decodeBounds(v any, path string) (Bounds, error) {
	var b Bounds
	obj, err := asObject(v, path, "bounds", ViolationInvalidType)
	if err != nil {
		return b, err
	}
	if err := closed(obj, path, "bounds", ViolationUnknownField, "termination", "maxNodeExecutions", "peakConcurrency", "attemptsPerNode"); err != nil {
		return b, err
	}
	r := &nodeReader{obj: obj, path: path, what: "bounds"}
	if tv, tp, ok := r.get("termination"); ok {
		b.Termination, r.err = decodeTermination(tv, tp)
	}
	b.MaxNodeExecutions = r.positive("maxNodeExecutions")
	b.PeakConcurrency = r.positive("peakConcurrency")
	if av, ap, ok := r.get("attemptsPerNode"); ok {
		var aobj map[string]any
		if aobj, r.err = asObject(av, ap, "attemptsPerNode", ViolationInvalidType); r.err == nil {
			b.AttemptsPerNode = make(map[string]uint64, len(aobj))
			for _, k := range sortedKeys(aobj) {
				kp := field(ap, k)
				if !IsIdentifier(k) {
					return b, errAt(kp, ViolationInvalidIdentifier, "attemptsPerNode key %q is not a node name", clip(k))
				}
				if b.AttemptsPerNode[k], r.err = decodePositive(aobj[k], kp, "attempts"); r.err != nil {
					break
				}
			}
		}
	}
	return b, r.err
}

func decodeTermination(v any, path string) (Termination, error) {
	var t Termination
	obj, err := asObject(v, path, "termination witness", ViolationInvalidType)
	if err != nil {
		return t, err
	}
	kv, err := need(obj, "kind", path, "termination witness")
	if err != nil {
		return t, err
	}
	kind, _ := kv.(string)
	switch t.Kind = TerminationKind(kind); t.Kind {
	case TerminationAcyclic:
		if err := closed(obj, path, "acyclic witness", ViolationUnknownField, "kind", "order"); err != nil {
			return t, err
		}
		ov, err := need(obj, "order", path, "acyclic witness")
		if err != nil {
			return t, err
		}
		a, err := nonEmptyList(ov, field(path, "order"), "witness order")
		if err != nil {
			return t, err
		}
		t.Order = make([]string, len(a))
		for i, e := range a {
			if t.Order[i], err = decodeIdentifier(e, index(field(path, "order"), i), "node name"); err != nil {
				return t, err
			}
		}
	case TerminationBounded:
		if err := closed(obj, path, "bounded witness", ViolationUnknownField, "kind", "ranking", "maxIterations"); err != nil {
			return t, err
		}
		rv, err := need(obj, "ranking", path, "bounded witness")
		if err != nil {
			return t, err
		}
		if _, err := nonEmptyList(rv, field(path, "ranking"), "witness ranking"); err != nil {
			return t, err
		}
		if t.Ranking, err = decodeFieldPaths(rv, field(path, "ranking"), "witness ranking"); err != nil {
			return t, err
		}
		mv, err := need(obj, "maxIterations", path, "bounded witness")
		if err != nil {
			return t, err
		}
		if t.MaxIterations, err = decodePositive(mv, field(path, "maxIterations"), "maxIterations"); err != nil {
			return t, err
		}
	default:
		return t, errAt(field(path, "kind"), ViolationInvalidValue, "unknown termination witness kind %s (expected acyclic or bounded)", quoteAny(kv))
	}
	return t, nil
}
