package graph

import (
	"slices"
	"strings"
)

// Severity of a GraphDiagnostic.
type Severity string

// Severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityInfo    Severity = "info"
)

// DiagnosticCode is a GraphDiagnostic code.
type DiagnosticCode string

// Diagnostic codes in their sort rank order.
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

// Rank is the code's position in the diagnostic order: schema_safety first,
// invalid_graph_shape last, unknown codes after every known one.
func (c DiagnosticCode) Rank() int {
	if i := slices.Index(codeRank, c); i >= 0 {
		return i
	}
	return len(codeRank)
}

// SegmentKind tags a diagnostic PathSegment.
type SegmentKind string

// Path segment kinds.
const (
	SegmentField SegmentKind = "field"
	SegmentIndex SegmentKind = "index"
	SegmentNode  SegmentKind = "node"
)

// InvalidNameIndex is the index a path segment uses for a field name that is
// not a valid identifier.
const InvalidNameIndex = 4294967295

// PathSegment is one step of a diagnostic path: a field name, an array
// index, or a node name.
type PathSegment struct {
	Kind  SegmentKind
	Name  string // field, node
	Index uint32 // index
}

// FieldSeg returns a field segment; a name that is not an identifier becomes
// an index segment with InvalidNameIndex.
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
func (s PathSegment) MarshalJSON() ([]byte, error) { return marshal(&s) }

func (s *PathSegment) writeJSON(w *jsonWriter) {
	w.open()
	w.strMember("kind", string(s.Kind))
	if s.Kind == SegmentIndex {
		w.uintMember("index", uint64(s.Index))
	} else {
		w.strMember("name", s.Name)
	}
	w.close()
}

// Path is a diagnostic path.
type Path []PathSegment

// With returns a copy of p extended by segs (never aliasing p).
func (p Path) With(segs ...PathSegment) Path {
	out := make(Path, 0, len(p)+len(segs))
	return append(append(out, p...), segs...)
}

// Diagnostic is a GraphDiagnostic.
type Diagnostic struct {
	Severity     Severity
	Code         DiagnosticCode
	Message      string
	Path         Path
	RelatedNodes []string
}

// MarshalJSON writes severity, code, message, path, relatedNodes.
func (d Diagnostic) MarshalJSON() ([]byte, error) { return marshal(&d) }

func (d *Diagnostic) writeJSON(w *jsonWriter) {
	w.open()
	w.strMember("severity", string(d.Severity))
	w.strMember("code", string(d.Code))
	w.strMember("message", d.Message)
	w.member("path")
	w.array(len(d.Path), func(i int) { d.Path[i].writeJSON(w) })
	w.member("relatedNodes")
	w.strings(d.RelatedNodes)
	w.close()
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
// name by bytes or index numerically); a prefix sorts first.
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

// CompareDiagnostics is the diagnostic order: path, code rank, message,
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

// SortDiagnostics sorts ds stably in CompareDiagnostics order.
func SortDiagnostics(ds []Diagnostic) { slices.SortStableFunc(ds, CompareDiagnostics) }

// DecodeDiagnostic strictly decodes one GraphDiagnostic.
func DecodeDiagnostic(data []byte) (Diagnostic, error) {
	return decodeDocument(data, decodeDiagnostic)
}

func decodeDiagnostic(v any, path string) (Diagnostic, error) {
	r := openClosed(v, path, "diagnostic", ViolationInvalidType, ViolationUnknownField, "severity", "code", "message", "path", "relatedNodes")
	d := Diagnostic{Severity: Severity(r.str("severity", "severity"))}
	if r.err == nil && d.Severity != SeverityError && d.Severity != SeverityWarning && d.Severity != SeverityInfo {
		r.fail("severity", ViolationInvalidValue, "unknown severity %q", clip(string(d.Severity)))
	}
	d.Code = DiagnosticCode(r.str("code", "code"))
	if r.err == nil && d.Code.Rank() == len(codeRank) {
		r.fail("code", ViolationInvalidValue, "unknown diagnostic code %q", clip(string(d.Code)))
	}
	d.Message = r.str("message", "message")
	d.Path = member(r, "path", func(v any, p string) (Path, error) {
		return decodeList(v, p, "diagnostic path", false, decodeSegment)
	})
	d.RelatedNodes = member(r, "relatedNodes", func(v any, p string) ([]string, error) {
		return decodeList(v, p, "relatedNodes", false, named("node name", decodeIdentifier))
	})
	return d, r.err
}

// decodeSegment reads a path segment: a field or node segment has a name,
// an index segment an index that fits uint32.
func decodeSegment(v any, path string) (PathSegment, error) {
	r := openObject(v, path, "path segment", ViolationInvalidType)
	kv, kind := r.kind()
	seg := PathSegment{Kind: SegmentKind(kind)}
	// The reader keeps naming the object "path segment"; only the
	// closedness message names the segment's kind.
	shape := func(allowed ...string) bool {
		if r.err == nil {
			r.err = closed(r.obj, path, kind+" segment", ViolationUnknownField, allowed...)
		}
		return r.err == nil
	}
	switch seg.Kind {
	case SegmentField, SegmentNode:
		if shape("kind", "name") {
			seg.Name = r.ident("name", "segment name")
		}
	case SegmentIndex:
		if shape("kind", "index") {
			u := member(r, "index", named("segment index", decodeCount))
			if r.err == nil && u > InvalidNameIndex {
				r.fail("index", ViolationInvalidBound, "segment index %d exceeds uint32", u)
			}
			seg.Index = uint32(u)
		}
	default:
		r.fail("kind", ViolationInvalidValue, "unknown path segment kind %s", quoteAny(kv))
	}
	return seg, r.err
}
