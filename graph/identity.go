package graph

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// canon returns the canonical bytes of something this package writes.
func canon(write func(w *jsonWriter)) string {
	w := &jsonWriter{}
	write(w)
	c, err := canonicalBytes(w.b)
	if err != nil {
		// Our writers emit only integers and valid JSON; fall back to the
		// raw bytes rather than failing a sort.
		return string(w.b)
	}
	return string(c)
}

func sortByCanon[T any](xs []T, write func(x *T, w *jsonWriter), dedupe bool) []T {
	type keyed struct {
		key string
		x   T
	}
	ks := make([]keyed, len(xs))
	for i := range xs {
		ks[i] = keyed{canon(func(w *jsonWriter) { write(&xs[i], w) }), xs[i]}
	}
	sort.SliceStable(ks, func(a, b int) bool { return ks[a].key < ks[b].key })
	out := make([]T, 0, len(ks))
	for i, k := range ks {
		if dedupe && i > 0 && ks[i-1].key == k.key {
			continue
		}
		out = append(out, k.x)
	}
	return out
}

func normPaths(ps []FieldPath) []FieldPath {
	return sortByCanon(ps, func(p *FieldPath, w *jsonWriter) { p.writeJSON(w) }, true)
}

func normInputBindings(bs []InputBinding) []InputBinding {
	return sortByCanon(bs, func(b *InputBinding, w *jsonWriter) { b.writeJSON(w) }, false)
}

// NormalizeGuard returns g normalised for identity: all/any operands
// normalised, same-operator children flattened, sorted by canonical bytes
// and deduplicated; k_of_n selectors sorted (duplicates kept); not
// normalised recursively; in and k_of_map unchanged.
func NormalizeGuard(g Guard) Guard {
	switch g.Kind {
	case GuardAll, GuardAny:
		var ops []Guard
		for _, c := range g.Guards {
			nc := NormalizeGuard(c)
			if nc.Kind == g.Kind {
				ops = append(ops, nc.Guards...)
			} else {
				ops = append(ops, nc)
			}
		}
		g.Guards = sortByCanon(ops, func(x *Guard, w *jsonWriter) { x.writeJSON(w) }, true)
	case GuardNot:
		if g.Inner != nil {
			inner := NormalizeGuard(*g.Inner)
			g.Inner = &inner
		}
	case GuardKOfN:
		g.Values = sortByCanon(slices.Clone(g.Values), func(s *ControlSelector, w *jsonWriter) { s.writeJSON(w) }, false)
	}
	return g
}

func normGuardPtr(g *Guard) *Guard {
	if g == nil {
		return nil
	}
	n := NormalizeGuard(*g)
	return &n
}

// NormalizeNode returns a normalised copy of n and its subtree;
// n itself is not modified.
func NormalizeNode(n Node) Node {
	switch t := n.(type) {
	case *Step:
		c := *t
		c.InputBindings, c.WriteBindings = normBindings(t.InputBindings, t.WriteBindings)
		return &c
	case *Verifier:
		c := *t
		c.InputBindings, c.WriteBindings = normBindings(t.InputBindings, t.WriteBindings)
		return &c
	case *Succeed:
		c := *t
		c.Bindings = normInputBindings(t.Bindings)
		return &c
	case *Seq:
		c := *t
		c.Children = normNodes(t.Children)
		c.PromotedStatePaths = normPaths(t.PromotedStatePaths)
		return &c
	case *Choice:
		c := *t
		c.Branches = make([]ChoiceBranch, len(t.Branches))
		for i, b := range t.Branches {
			c.Branches[i] = ChoiceBranch{When: NormalizeGuard(b.When), Node: NormalizeNode(b.Node)}
		}
		c.Otherwise = NormalizeNode(t.Otherwise)
		c.PromotedStatePaths = normPaths(t.PromotedStatePaths)
		return &c
	case *Par:
		c := *t
		c.Branches = normNodes(t.Branches)
		sort.SliceStable(c.Branches, func(a, b int) bool { return nameOf(c.Branches[a]) < nameOf(c.Branches[b]) })
		c.PromotedStatePaths = normPaths(t.PromotedStatePaths)
		c.Join.When = normGuardPtr(t.Join.When)
		return &c
	case *Loop:
		c := *t
		c.Body = NormalizeNode(t.Body)
		c.Until = normGuardPtr(t.Until)
		c.PromotedStatePaths = normPaths(t.PromotedStatePaths)
		return &c
	case *Map:
		c := *t
		c.Body = NormalizeNode(t.Body)
		c.PromotedStatePaths = normPaths(t.PromotedStatePaths)
		return &c
	case *Fail:
		c := *t
		return &c
	}
	return n
}

func normNodes(ns []Node) []Node {
	out := make([]Node, len(ns))
	for i, n := range ns {
		out[i] = NormalizeNode(n)
	}
	return out
}

// normBindings sorts an executable's input and write bindings by their
// canonical bytes (duplicates kept).
func normBindings(in []InputBinding, out []WriteBinding) ([]InputBinding, []WriteBinding) {
	return normInputBindings(in), sortByCanon(out, func(b *WriteBinding, w *jsonWriter) { b.writeJSON(w) }, false)
}

func nameOf(n Node) string {
	if n == nil {
		return ""
	}
	return n.NodeName()
}

// Normalize returns a normalised copy of g.
func Normalize(g *GraphSpec) *GraphSpec {
	if g == nil {
		return nil
	}
	c := *g
	c.Root = NormalizeNode(g.Root)
	return &c
}

// CanonicalIR returns the canonical bytes of the normalised compiled IR;
// its SHA-256 is the graph identity.
func CanonicalIR(ir *IR) ([]byte, error) {
	if ir == nil || ir.Spec == nil {
		return nil, errors.New("graph: no compiled IR")
	}
	w := &jsonWriter{}
	w.graph(Normalize(ir.Spec), &ir.Bounds)
	return canonicalBytes(w.b)
}

// IdentityIR is the GraphIdentity of a compiled IR: lowercase hex SHA-256 of
// CanonicalIR.
func IdentityIR(ir *IR) (string, error) {
	c, err := CanonicalIR(ir)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// ErrStructurallyInvalid is returned by Identity for a graph that has no
// bounds because Structural rejects it.
var ErrStructurallyInvalid = errors.New("graph: graph is structurally invalid")

// Identity is the GraphIdentity of g compiled with its structural bounds
// (the bounds every verifier computes): lowercase hex SHA-256, no
// prefix. It fails with ErrStructurallyInvalid when Structural rejects g.
func Identity(g *GraphSpec) (string, error) {
	r := Structural(g)
	if !r.OK {
		msg := "no bounds"
		if len(r.Diagnostics) > 0 {
			msg = r.Diagnostics[0].Message
		}
		return "", fmt.Errorf("%w: %s", ErrStructurallyInvalid, msg)
	}
	return IdentityIR(&IR{Spec: g, Bounds: *r.Bounds})
}

// GraphDiff is the dry-run apply diff: node names, each list sorted.
type GraphDiff struct {
	Added   []string
	Removed []string
	Changed []string
}

// MarshalJSON writes {"added":[],"removed":[],"changed":[]}.
func (d GraphDiff) MarshalJSON() ([]byte, error) {
	w := &jsonWriter{}
	w.open()
	for _, m := range []struct {
		key   string
		names []string
	}{{"added", d.Added}, {"removed", d.Removed}, {"changed", d.Changed}} {
		w.member(m.key)
		w.strings(m.names)
	}
	w.close()
	return w.b, nil
}

// DuplicateNodeError reports a duplicate node name met while diffing; the
// server answers GRAPH_INVALID "Graph verifier returned invalid compiled
// IR" with details.reason = Error().
type DuplicateNodeError struct{ Name string }

func (e *DuplicateNodeError) Error() string { return "duplicate node name " + e.Name }

// NodeDigests maps every node name of g (groups included) to the canonical
// bytes of its normalised subtree.
func NodeDigests(g *GraphSpec) (map[string]string, error) {
	out := map[string]string{}
	if g == nil || g.Root == nil {
		return out, nil
	}
	var err error
	var visit func(n Node)
	visit = func(n Node) {
		if err != nil || n == nil {
			return
		}
		if _, dup := out[n.NodeName()]; dup {
			err = &DuplicateNodeError{Name: n.NodeName()}
			return
		}
		out[n.NodeName()] = canon(func(w *jsonWriter) { w.node(n) })
		for _, c := range Children(n) {
			visit(c)
		}
	}
	visit(NormalizeNode(g.Root))
	return out, err
}

// Diff compares two graphs node by node. old may be nil (empty
// cluster): every node is then added. A changed leaf also changes every
// ancestor. Duplicate names fail with *DuplicateNodeError.
func Diff(old, new *GraphSpec) (GraphDiff, error) {
	d := GraphDiff{Added: []string{}, Removed: []string{}, Changed: []string{}}
	o, err := NodeDigests(old)
	if err != nil {
		return d, err
	}
	n, err := NodeDigests(new)
	if err != nil {
		return d, err
	}
	for name, nb := range n {
		ob, ok := o[name]
		switch {
		case !ok:
			d.Added = append(d.Added, name)
		case ob != nb:
			d.Changed = append(d.Changed, name)
		}
	}
	for name := range o {
		if _, ok := n[name]; !ok {
			d.Removed = append(d.Removed, name)
		}
	}
	sort.Strings(d.Added)
	sort.Strings(d.Removed)
	sort.Strings(d.Changed)
	return d, nil
}

// Fingerprint is the idempotency fingerprint of a request: the
// lowercase hex SHA-256 of the canonical JSON of {"method": method,
// "params": params}. params is the typed params value (anything
// encoding/json marshals, or a json.RawMessage); a top-level
// "idempotencyKey" member, if present, is removed first. Two requests are
// the same operation iff their fingerprints are equal.
func Fingerprint(method string, params any) (string, error) {
	tree, err := parseValue(params)
	if err != nil {
		return "", fmt.Errorf("graph: fingerprint params: %w", err)
	}
	if obj, ok := tree.(map[string]any); ok {
		delete(obj, "idempotencyKey")
	}
	w := &jsonWriter{}
	if err := w.canonical(map[string]any{"method": method, "params": tree}, true); err != nil {
		return "", err
	}
	sum := sha256.Sum256(w.b)
	return hex.EncodeToString(sum[:]), nil
}
