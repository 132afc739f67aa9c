package reduce

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"strings"

	"github.com/oecp/oecp/graph"
)

// Values are generic JSON trees (map[string]any, []any, json.Number, string,
// bool, nil) treated as immutable: setPath copies the objects along the path
// (copy-on-write), so a scope copy is a pointer copy.

// parseValue decodes one JSON document with UseNumber. Empty input is null.
func parseValue(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errf(ErrEncoding, "%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errf(ErrEncoding, "trailing data after JSON value")
	}
	return v, nil
}

// canonical writes v as canonical JSON (sorted keys, compact): the
// deterministic byte form of every value the reducer emits or compares.
func canonical(v any) (json.RawMessage, error) {
	b, err := graph.CanonicalJSON(v)
	if err != nil {
		return nil, errf(ErrEncoding, "%v", err)
	}
	return b, nil
}

func pathString(p graph.FieldPath) string { return strings.Join(p, ".") }

// selectPath reads path from v: every segment must hit an object key.
func selectPath(v any, path graph.FieldPath) (any, error) {
	cur := v
	for i, seg := range path {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, errf(ErrMissingSelectedValue, "path %q: %q is not an object", pathString(path), pathString(path[:i]))
		}
		next, ok := obj[seg]
		if !ok {
			return nil, errf(ErrMissingSelectedValue, "path %q: field %q is missing", pathString(path), seg)
		}
		cur = next
	}
	return cur, nil
}

// setPath returns a copy of root with path set to x. Missing intermediate
// keys are created as objects; a non-object on the way (or at the root) is
// ErrInvalidDurableValue.
func setPath(root any, path graph.FieldPath, x any) (any, error) {
	if len(path) == 0 {
		return x, nil
	}
	obj, ok := root.(map[string]any)
	if !ok {
		return nil, errf(ErrInvalidDurableValue, "cannot write %q through a non-object", pathString(path))
	}
	out := make(map[string]any, len(obj)+1)
	maps.Copy(out, obj)
	child, exists := obj[path[0]]
	if !exists && len(path) > 1 {
		child = map[string]any{}
	}
	v, err := setPath(child, path[1:], x)
	if err != nil {
		return nil, err
	}
	out[path[0]] = v
	return out, nil
}

func isPrefix(p, q graph.FieldPath) bool {
	if len(p) > len(q) {
		return false
	}
	for i := range p {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}

func equalPath(p, q graph.FieldPath) bool { return len(p) == len(q) && isPrefix(p, q) }

// writtenUnder is the prefix rule of copy-out: the parts of written that a
// promotion of promoted really carries, with ancestors absorbing
// descendants. The result keeps first-seen order.
func writtenUnder(promoted, written []graph.FieldPath) []graph.FieldPath {
	var kept []graph.FieldPath
	add := func(p graph.FieldPath) {
		for _, k := range kept {
			if equalPath(k, p) {
				return
			}
		}
		kept = append(kept, p)
	}
	for _, p := range promoted {
		for _, w := range written {
			switch {
			case isPrefix(p, w):
				add(w)
			case isPrefix(w, p):
				add(p)
			}
		}
	}
	var out []graph.FieldPath
	for i, k := range kept {
		absorbed := false
		for j, a := range kept {
			if i != j && len(a) < len(k) && isPrefix(a, k) {
				absorbed = true
				break
			}
		}
		if !absorbed {
			out = append(out, k)
		}
	}
	return out
}

func addWritten(ws []graph.FieldPath, p graph.FieldPath) []graph.FieldPath {
	for _, w := range ws {
		if equalPath(w, p) {
			return ws
		}
	}
	return append(ws, p)
}

// isWritten reports whether p (or a part of it) is in the written set.
func isWritten(ws []graph.FieldPath, p graph.FieldPath) bool {
	for _, w := range ws {
		if isPrefix(p, w) || isPrefix(w, p) {
			return true
		}
	}
	return false
}
