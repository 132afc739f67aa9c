package graph

import (
	"slices"
	"strings"
)

// Severity of a GraphDiagnostic.
type Severity string

// Severities (§5.8).
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityInfo    Severity = "info"
)

// DiagnosticCode is a GraphDiagnostic code (§5.8).
type DiagnosticCode string

// Diagnostic codes in their sort rank order (§5.8).
const (
	CodeSchemaSafety           DiagnosticCode = "schema_safety"
	CodeReachability           DiagnosticCode = "reachability"
	CodeChoiceExhaustiveness   DiagnosticCode = "choice_exhaustiveness"
	CodeLoopExitSatisfiability DiagnosticCode = "loop_exit_satisfiability"
	CodeMissingBound           DiagnosticCode = "missing_bound"
	CodeWriteConflict          DiagnosticCode = "write_conflict"
	CodeCeilingExceeded        DiagnosticCode = "ceiling_exceeded"
	CodeCyclicReference        DiagnosticCode = "cyclic_reference"
	CodeUndefinedRead          DiagnosticCode = "undefined_read"
	CodeInvalidGraphShape      DiagnosticCode = "invalid_graph_shape"
)

var codeRank = []DiagnosticCode{
	CodeSchemaSafety, CodeReachability, CodeChoiceExhaustiveness, CodeLoopExitSatisfiability,
	CodeMissingBound, CodeWriteConflict, CodeCeilingExceeded, CodeCyclicReference,
	CodeUndefinedRead, CodeInvalidGraphShape,
}

// Rank is the code's position in the §5.8 diagnostic order (unknown codes
// sort last).
func (c DiagnosticCode) Rank() int {
	if i := slices.Index(codeRank, c); i >= 0 {
		return i
	}
	return len(codeRank)
}

// SegmentKind tags a diagnostic PathSegment.
type SegmentKind string

// Path segment kinds (§5.8).
const (
	SegmentField SegmentKind = "field"
	SegmentIndex SegmentKind = "index"
	SegmentNode  SegmentKind = "node"
)

// InvalidNameIndex is the index a path segment uses for a field name that is
// not a valid identifier (§5.8).
const InvalidNameIndex = 4294967295

// PathSegment is one step of a diagnostic path: a field name, an array
// index, or a node name.
type PathSegment struct {
	Kind  SegmentKind
	Name  string // field, node
	Index uint32 // index
}

// FieldSeg returns a field segment; a name that is not an identifier becomes
// an index segment with InvalidNameIndex (§5.8).
func FieldSeg(name string) PathSegment {
	if !IsIdentifier(name) {
		return PathSegment{Kind: SegmentIndex, Index: InvalidNameIndex}
	}
	return PathSegment{Kind: SegmentField, Name: name}
}

// IndexSeg returns an index segment.
func IndexSeg(i int) PathSegment { return PathSegment{Kind: SegmentIndex, Index: uint32(i)} }

// NodeSeg returns a node segment.
func NodeSeg(name string) PathSegment { return PathSegment{Kind: SegmentNode, Name: name} }

// MarshalJSON writes {"kind":"field"|"node","name"} or {"kind":"index","index"}.
func (s PathSegment) MarshalJSON() ([]byte, error) {
	w := &jsonWriter{}
	s.writeJSON(w)
	return w.b, nil
}

func (s *PathSegment) writeJSON(w *jsonWriter) {
	w.raw(`{"kind":`)
	w.str(string(s.Kind))
	if s.Kind == SegmentIndex {
		w.raw(`,"index":`)
		w.uint(uint64(s.Index))
	} else {
		w.raw(`,"name":`)
		w.str(s.Name)
	}
	w.raw("}")
}

// Path is a diagnostic path.
type Path []PathSegment

// With returns a copy of p extended by segs (never aliasing p).
func (p Path) With(segs ...PathSegment) Path {
	out := make(Path, 0, len(p)+len(segs))
	return append(append(out, p...), segs...)
}

// Diagnostic is a GraphDiagnostic (§5.8).
type Diagnostic struct {
	Severity     Severity
	Code         DiagnosticCode
	Message      string
	Path         Path
	RelatedNodes []string
}

// MarshalJSON writes severity, code, message, path, relatedNodes.
func (d Diagnostic) MarshalJSON() ([]byte, error) {
	w := &jsonWriter{}
	d.writeJSON(w)
	return w.b, nil
}

func (d *Diagnostic) writeJSON(w *jsonWriter) {
	w.raw(`{"severity":`)
	w.str(string(d.Severity))
	w.raw(`,"code":`)
	w.str(string(d.Code))
	w.raw(`,"message":`)
	w.str(d.Message)
	w.raw(`,"path":[`)
	for i, s := range d.Path {
		if i > 0 {
			w.raw(",")
		}
		s.writeJSON(w)
	}
	w.raw(`],"relatedNodes":`)
	w.strings(d.RelatedNodes)
	w.raw("}")
}

func segKey(s PathSegment) int {
	switch s.Kind {
	case SegmentField:
		return 0
	case SegmentIndex:
		return 1
	}
	return 2
}

// ComparePaths orders paths segment by segment (field < index < node, then
// name by bytes or index numerically); a prefix sorts first (§5.8).
func ComparePaths(a, b Path) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		ka, kb := segKey(a[i]), segKey(b[i])
		if ka != kb {
			return ka - kb
		}
		if ka == 1 {
			if a[i].Index != b[i].Index {
				if a[i].Index < b[i].Index {
					return -1
				}
				return 1
			}
			continue
		}
		if c := strings.Compare(a[i].Name, b[i].Name); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

// CompareDiagnostics is the §5.8 order: path, code rank, message,
// relatedNodes.
func CompareDiagnostics(a, b Diagnostic) int {
	if c := ComparePaths(a.Path, b.Path); c != 0 {
		return c
	}
	if c := a.Code.Rank() - b.Code.Rank(); c != 0 {
		return c
	}
	if c := strings.Compare(a.Message, b.Message); c != 0 {
		return c
	}
	return slices.Compare(a.RelatedNodes, b.RelatedNodes)
}

// SortDiagnostics sorts ds deterministically per §5.8.
func SortDiagnostics(ds []Diagnostic) { slices.SortStableFunc(ds, CompareDiagnostics) }

// DecodeDiagnostic strictly decodes one GraphDiagnostic.
func DecodeDiagnostic(data []byte) (Diagnostic, error) {
	var d Diagnostic
	tree, err := parseJSON(data)
	if err != nil {
		return d, errAt("$", ViolationMalformedJSON, "%v", err)
	}
	obj, err := asObject(tree, "$", "diagnostic", ViolationInvalidType)
	if err != nil {
		return d, err
	}
	if err := closed(obj, "$", "diagnostic", ViolationUnknownField, "severity", "code", "message", "path", "relatedNodes"); err != nil {
		return d, err
	}
	r := &nodeReader{obj: obj, path: "$", what: "diagnostic"}
	str := func(key string) string {
		v, p, ok := r.get(key)
		if !ok {
			return ""
		}
		s, err := asString(v, p, key)
		r.err = err
		return s
	}
	d.Severity = Severity(str("severity"))
	if r.err == nil && d.Severity != SeverityError && d.Severity != SeverityWarning && d.Severity != SeverityInfo {
		r.err = errAt("$.severity", ViolationInvalidValue, "unknown severity %q", clip(string(d.Severity)))
	}
	d.Code = DiagnosticCode(str("code"))
	if r.err == nil && d.Code.Rank() == len(codeRank) {
		r.err = errAt("$.code", ViolationInvalidValue, "unknown diagnostic code %q", clip(string(d.Code)))
	}
	d.Message = str("message")
	if v, p, ok := r.get("path"); ok {
		d.Path, r.err = decodeDiagPath(v, p)
	}
	if v, p, ok := r.get("relatedNodes"); ok {
		var a []any
		if a, r.err = asArray(v, p, "relatedNodes"); r.err == nil {
			d.RelatedNodes = make([]string, len(a))
			for i, e := range a {
				if d.RelatedNodes[i], r.err = decodeIdentifier(e, index(p, i), "node name"); r.err != nil {
					break
				}
			}
		}
	}
	return d, r.err
}

func decodeDiagPath(v any, path string) (Path, error) {
	a, err := asArray(v, path, "diagnostic path")
	if err != nil {
		return nil, err
	}
	out := make(Path, len(a))
	for i, e := range a {
		p := index(path, i)
		obj, err := asObject(e, p, "path segment", ViolationInvalidType)
		if err != nil {
			return nil, err
		}
		kv, err := need(obj, "kind", p, "path segment")
		if err != nil {
			return nil, err
		}
		kind, _ := kv.(string)
		switch SegmentKind(kind) {
		case SegmentField, SegmentNode:
			if err := closed(obj, p, kind+" segment", ViolationUnknownField, "kind", "name"); err != nil {
				return nil, err
			}
			nv, err := need(obj, "name", p, "path segment")
			if err != nil {
				return nil, err
			}
			name, err := decodeIdentifier(nv, field(p, "name"), "segment name")
			if err != nil {
				return nil, err
			}
			out[i] = PathSegment{Kind: SegmentKind(kind), Name: name}
		case SegmentIndex:
			if err := closed(obj, p, "index segment", ViolationUnknownField, "kind", "index"); err != nil {
				return nil, err
			}
			iv, err := need(obj, "index", p, "path segment")
			if err != nil {
				return nil, err
			}
			u, err := decodeUint(iv, field(p, "index"), "segment index", 0)
			if err != nil {
				return nil, err
			}
			if u > InvalidNameIndex {
				return nil, errAt(field(p, "index"), ViolationInvalidBound, "segment index %d exceeds uint32", u)
			}
			out[i] = PathSegment{Kind: SegmentIndex, Index: uint32(u)}
		default:
			return nil, errAt(field(p, "kind"), ViolationInvalidValue, "unknown path segment kind %s", quoteAny(kv))
		}
	}
	return out, nil
}
