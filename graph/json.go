package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseJSON parses one JSON document into a generic tree of map[string]any,
// []any, json.Number, string, bool and nil. Duplicate object keys collapse
// with the last value winning, as the reference does. Trailing data
// and invalid UTF-8 are rejected.
func parseJSON(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("document is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("malformed JSON: trailing data after the document")
	}
	return v, nil
}

// jsonWriter builds compact JSON with the reference's string escaping.
// Objects are written with open, member and close; first is true right
// after open, so member knows whether a comma goes before the key. One flag
// serves nested objects too: after any value, the next member of the
// enclosing object is never its first.
type jsonWriter struct {
	b     []byte
	first bool
}

// jsonValue is a value this package writes itself.
type jsonValue interface{ writeJSON(w *jsonWriter) }

// marshal returns the JSON of v.
func marshal(v jsonValue) ([]byte, error) {
	w := &jsonWriter{}
	v.writeJSON(w)
	return w.b, nil
}

func (w *jsonWriter) raw(s string) { w.b = append(w.b, s...) }

func (w *jsonWriter) uint(u uint64) { w.b = strconv.AppendUint(w.b, u, 10) }

func (w *jsonWriter) open() { w.b, w.first = append(w.b, '{'), true }

func (w *jsonWriter) close() { w.b, w.first = append(w.b, '}'), false }

// member writes `"k":`, preceded by a comma unless it is the object's first.
func (w *jsonWriter) member(k string) {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
	w.str(k)
	w.b = append(w.b, ':')
}

// array writes n items with item.
func (w *jsonWriter) array(n int, item func(i int)) {
	w.b = append(w.b, '[')
	for i := 0; i < n; i++ {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		item(i)
	}
	w.b = append(w.b, ']')
}

const hexDigits = "0123456789abcdef"

// shortEscapes maps the bytes with a two-character escape to its letter.
var shortEscapes = [256]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// str writes s as a JSON string escaping only `"`, `\` and C0 controls:
// `<`, `>`, `&`, U+2028/U+2029 and non-ASCII stay raw.
func (w *jsonWriter) str(s string) {
	w.b = append(w.b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		w.b = append(w.b, s[start:i]...)
		if e := shortEscapes[c]; e != 0 {
			w.b = append(w.b, '\\', e)
		} else {
			w.b = append(w.b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	w.b = append(w.b, s[start:]...)
	w.b = append(w.b, '"')
}

func (w *jsonWriter) strings(ss []string) { w.array(len(ss), func(i int) { w.str(ss[i]) }) }

// ErrFloatInCompiledIR is returned when canonicalising compiled IR that
// contains a floating-point number.
var ErrFloatInCompiledIR = errors.New("graph: compiled IR must not contain floating-point numbers")

// CanonicalJSON writes v as canonical JSON: compact UTF-8, object keys
// sorted by raw byte order at every level, arrays in order, strings escaped
// as jsonWriter.str does, integers in decimal. v may be a json.RawMessage or []byte holding
// JSON, or any value encoding/json can marshal (types with MarshalJSON, such
// as *GraphSpec, are honoured). Floats are allowed and written in shortest
// round-trip form with a trailing ".0" when integral.
func CanonicalJSON(v any) ([]byte, error) {
	if isTree(v) {
		// A tree of parsed JSON values reads back as itself from what
		// encoding/json writes of it, so it is written as it is.
		w := &jsonWriter{}
		if err := w.canonical(v, true); err == nil {
			return w.b, nil
		}
	}
	tree, err := parseValue(v)
	if err != nil {
		return nil, fmt.Errorf("graph: canonical JSON: %w", err)
	}
	w := &jsonWriter{}
	if err := w.canonical(tree, true); err != nil {
		return nil, err
	}
	return w.b, nil
}

// isTree reports whether v is a tree of parsed JSON values: nil, bool,
// valid UTF-8 strings, number literals (json.Number), []any and
// map[string]any with valid UTF-8 keys.
func isTree(v any) bool {
	switch t := v.(type) {
	case nil, bool:
		return true
	case json.Number:
		return isNumber(string(t))
	case string:
		return utf8.ValidString(t)
	case []any:
		for _, x := range t {
			if !isTree(x) {
				return false
			}
		}
		return true
	case map[string]any:
		for k, x := range t {
			if !utf8.ValidString(k) || !isTree(x) {
				return false
			}
		}
		return true
	}
	return false
}

// isNumber reports whether s is a JSON number literal, as encoding/json
// requires of a json.Number it writes.
func isNumber(s string) bool {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) || s[len(s)-1] < '0' || s[len(s)-1] > '9' {
		return false
	}
	return json.Valid([]byte(s))
}

// parseValue parses v: JSON bytes as they are, anything else as
// encoding/json marshals it.
func parseValue(v any) (any, error) {
	var data []byte
	switch t := v.(type) {
	case json.RawMessage:
		data = t
	case []byte:
		data = t
	default:
		var err error
		if data, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	return parseJSON(data)
}

// canonicalBytes canonicalises JSON produced by this package's own writers.
// Floats are rejected since they cannot occur in a graph or compiled IR.
func canonicalBytes(data []byte) ([]byte, error) {
	tree, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	w := &jsonWriter{b: make([]byte, 0, len(data))}
	if err := w.canonical(tree, false); err != nil {
		return nil, err
	}
	return w.b, nil
}

func (w *jsonWriter) canonical(v any, allowFloat bool) error {
	switch t := v.(type) {
	case nil:
		w.raw("null")
	case bool:
		if t {
			w.raw("true")
		} else {
			w.raw("false")
		}
	case string:
		w.str(t)
	case json.Number:
		s, isFloat, err := canonicalNumber(string(t))
		if err != nil {
			return err
		}
		if isFloat && !allowFloat {
			return ErrFloatInCompiledIR
		}
		w.raw(s)
	case []any:
		var err error
		w.array(len(t), func(i int) {
			if err == nil {
				err = w.canonical(t[i], allowFloat)
			}
		})
		return err
	case map[string]any:
		w.open()
		for _, k := range sortedKeys(t) {
			w.member(k)
			if err := w.canonical(t[k], allowFloat); err != nil {
				return err
			}
		}
		w.close()
	default:
		return fmt.Errorf("graph: canonical JSON: unexpected value %T", v)
	}
	return nil
}

// canonicalNumber normalises a JSON number literal. Integers that fit 64
// bits keep their decimal form; anything else is a float (as in the
// reference, whose JSON numbers are i64, u64 or f64) written in shortest
// round-trip form: "1.0", "1.5", "1e21", "1e-7".
func canonicalNumber(lit string) (s string, isFloat bool, err error) {
	if !strings.ContainsAny(lit, ".eE") {
		if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return strconv.FormatInt(i, 10), false, nil
		}
		if u, err := strconv.ParseUint(lit, 10, 64); err == nil {
			return strconv.FormatUint(u, 10), false, nil
		}
	}
	f, perr := strconv.ParseFloat(lit, 64)
	if perr != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", true, fmt.Errorf("graph: number %s is not a finite float", lit)
	}
	return formatFloat(f), true, nil
}

// formatFloat mimics the shortest round-trip formatting of the reference
// (Rust ryu via serde_json): decimal notation for 1e-5 <= |f| < 1e21,
// otherwise scientific with a bare exponent.
func formatFloat(f float64) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	abs := math.Abs(f)
	if abs >= 1e-5 && abs < 1e21 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	if exp[0] == '+' {
		exp = exp[1:]
	}
	neg := strings.HasPrefix(exp, "-")
	exp = strings.TrimLeft(strings.TrimPrefix(exp, "-"), "0")
	if neg {
		exp = "-" + exp
	}
	return mant + "e" + exp
}
