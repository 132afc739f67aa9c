package graph

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// decodeDocument parses data and decodes the whole document with dec; a
// parse failure is MALFORMED_JSON at "$".
func decodeDocument[T any](data []byte, dec func(v any, path string) (T, error)) (T, error) {
	tree, err := parseJSON(data)
	if err != nil {
		var zero T
		return zero, errAt("$", ViolationMalformedJSON, "%v", err)
	}
	return dec(tree, "$")
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "an unknown value"
}

// quoteAny echoes a string value quoted and clipped, anything else by its
// JSON type.
func quoteAny(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(clip(s))
	}
	return jsonTypeName(v)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func field(path, key string) string { return path + "." + key }

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func asObject(v any, path, what string, code Violation) (map[string]any, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errAt(path, code, "%s must be an object, got %s", what, jsonTypeName(v))
	}
	return obj, nil
}

// closed rejects the first (by byte order) key of obj not in allowed.
func closed(obj map[string]any, path, what string, code Violation, allowed ...string) error {
	for _, k := range sortedKeys(obj) {
		if !slices.Contains(allowed, k) {
			return errAt(path, code, "unknown field %q in %s (allowed: %s)", k, what, strings.Join(allowed, ", "))
		}
	}
	return nil
}

func need(obj map[string]any, key, path, what string) (any, error) {
	v, ok := obj[key]
	if !ok {
		return nil, errAt(path, ViolationMissingField, "%s is missing required field %q", what, key)
	}
	return v, nil
}

func asString(v any, path, what string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", errAt(path, ViolationInvalidType, "%s must be a string, got %s", what, jsonTypeName(v))
	}
	return s, nil
}

// asList checks that v is an array of at most MaxNonEmptyListLen items,
// and at least one when nonEmpty.
func asList(v any, path, what string, nonEmpty bool) ([]any, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, errAt(path, ViolationInvalidType, "%s must be an array, got %s", what, jsonTypeName(v))
	}
	if nonEmpty && (len(a) == 0 || len(a) > MaxNonEmptyListLen) {
		return nil, errAt(path, ViolationInvalidCollection, "%s must have 1..%d items, got %d", what, MaxNonEmptyListLen, len(a))
	}
	return a, nil
}

// decodeList decodes every item of the array v with dec, stopping at the
// first failure.
func decodeList[T any](v any, path, what string, nonEmpty bool, dec func(v any, path string) (T, error)) ([]T, error) {
	a, err := asList(v, path, what, nonEmpty)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(a))
	for i, e := range a {
		if out[i], err = dec(e, index(path, i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// decodeNameMap decodes an object keyed by identifiers (the object what),
// each value with dec, in sorted key order; a key that is not an identifier
// fails with badKey, a format taking the clipped key.
func decodeNameMap[T any](v any, path, what, badKey string, dec func(v any, path string) (T, error)) (map[string]T, error) {
	obj, err := asObject(v, path, what, ViolationInvalidType)
	if err != nil {
		return nil, err
	}
	out := make(map[string]T, len(obj))
	for _, k := range sortedKeys(obj) {
		kp := field(path, k)
		if !IsIdentifier(k) {
			return nil, errAt(kp, ViolationInvalidIdentifier, badKey, clip(k))
		}
		if out[k], err = dec(obj[k], kp); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// named binds the noun a decoder uses in its messages.
func named[T any](what string, dec func(v any, path, what string) (T, error)) func(any, string) (T, error) {
	return func(v any, path string) (T, error) { return dec(v, path, what) }
}

func decodeIdentifier(v any, path, what string) (string, error) {
	s, err := asString(v, path, what)
	if err == nil && !IsIdentifier(s) {
		err = errAt(path, ViolationInvalidIdentifier, "%s %q is not an identifier (^[A-Za-z_][A-Za-z0-9_.-]*$, 1..%d bytes)", what, clip(s), MaxIdentifierBytes)
	}
	return s, err
}

func decodeStableRef(v any, path, what string) (string, error) {
	s, err := asString(v, path, what)
	if err == nil && !IsStableRef(s) {
		err = errAt(path, ViolationInvalidStableRef, "%s %q is not a stable reference name@version (version without leading zero, at most %d bytes)", what, clip(s), MaxStableRefBytes)
	}
	return s, err
}

// decodeUint decodes an integer in [lo, MaxSafeInteger]; integral floats
// such as 3.0 are accepted.
func decodeUint(v any, path, what string, lo uint64) (uint64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, errAt(path, ViolationInvalidType, "%s must be an integer, got %s", what, jsonTypeName(v))
	}
	lit := string(n)
	var u uint64
	inRange := false
	if !strings.ContainsAny(lit, ".eE") {
		if x, err := strconv.ParseUint(lit, 10, 64); err == nil {
			u, inRange = x, x >= lo && x <= MaxSafeInteger
		}
	} else if f, err := strconv.ParseFloat(lit, 64); err == nil && f == math.Trunc(f) && f >= float64(lo) && f <= MaxSafeInteger {
		u, inRange = uint64(f), true
	}
	if !inRange {
		return 0, errAt(path, ViolationInvalidBound, "%s must be an integer in %d..%d, got %s", what, lo, uint64(MaxSafeInteger), clip(lit))
	}
	return u, nil
}

func decodePositive(v any, path, what string) (uint64, error) { return decodeUint(v, path, what, 1) }

func decodeCount(v any, path, what string) (uint64, error) { return decodeUint(v, path, what, 0) }

func decodeFieldPath(v any, path, what string) (FieldPath, error) {
	a, err := asList(v, path, what, false)
	if err != nil {
		return nil, err
	}
	if len(a) == 0 || len(a) > MaxFieldPathLen {
		return nil, errAt(path, ViolationInvalidPath, "%s must have 1..%d field names, got %d", what, MaxFieldPathLen, len(a))
	}
	return decodeList(v, path, what, false, named("field name", decodeIdentifier))
}

func decodeFieldPaths(v any, path, what string) ([]FieldPath, error) {
	return decodeList(v, path, what, false, named("field path", decodeFieldPath))
}

// decodeLabelSet decodes a 1..MaxLabelSetLen set of unique labels and
// returns it sorted.
func decodeLabelSet(v any, path, what string) ([]string, error) {
	a, err := asList(v, path, what, false)
	if err != nil {
		return nil, err
	}
	if len(a) == 0 {
		return nil, errAt(path, ViolationEmptyEnum, "%s must not be empty", what)
	}
	if len(a) > MaxLabelSetLen {
		return nil, errAt(path, ViolationInvalidCollection, "%s must have at most %d labels, got %d", what, MaxLabelSetLen, len(a))
	}
	labels, err := decodeList(v, path, what, false, named("label", decodeIdentifier))
	if err != nil {
		return nil, err
	}
	slices.Sort(labels)
	for i := 1; i < len(labels); i++ {
		if labels[i] == labels[i-1] {
			return nil, errAt(path, ViolationDuplicateEnum, "%s contains duplicate label %q", what, labels[i])
		}
	}
	return labels, nil
}

// reader decodes the members of one object in order, keeping the first
// failure: once err is set every further read is a no-op returning the zero
// value, so decoders read field after field without checking each.
type reader struct {
	obj  map[string]any
	path string
	what string // the object, as messages name it ("step node")
	err  error
}

// openObject starts reading v as the object what; a non-object fails with
// code.
func openObject(v any, path, what string, code Violation) *reader {
	r := &reader{path: path, what: what}
	r.obj, r.err = asObject(v, path, what, code)
	return r
}

// openClosed is openObject for an object with exactly the members allowed
// (some may be optional); any other member fails with unknownCode.
func openClosed(v any, path, what string, code, unknownCode Violation, allowed ...string) *reader {
	r := openObject(v, path, what, code)
	r.only(unknownCode, allowed...)
	return r
}

// only rejects members not in allowed with code.
func (r *reader) only(code Violation, allowed ...string) {
	if r.err == nil {
		r.err = closed(r.obj, r.path, r.what, code, allowed...)
	}
}

// get returns the required member key and its path.
func (r *reader) get(key string) (any, string, bool) {
	if r.err != nil {
		return nil, "", false
	}
	v, err := need(r.obj, key, r.path, r.what)
	if err != nil {
		r.err = err
		return nil, "", false
	}
	return v, field(r.path, key), true
}

// opt returns the member key when it is present and not null: an explicit
// null means absent.
func (r *reader) opt(key string) (any, string, bool) {
	v, ok := r.obj[key]
	if r.err != nil || !ok || v == nil {
		return nil, "", false
	}
	return v, field(r.path, key), true
}

// openKind starts reading v as the object what whose required "kind"
// member selects its shape; once the kind is read the reader names the
// object by kind and suffix ("quorum join").
func openKind(v any, path, what, suffix string) (*reader, any, string) {
	r := openObject(v, path, what, ViolationInvalidType)
	kv, kind := r.kind()
	if r.err == nil {
		r.what = kind + suffix
	}
	return r, kv, kind
}

// kind reads the required "kind" member: its value (echoed in messages)
// and the string it holds, "" for any other value.
func (r *reader) kind() (any, string) {
	kv, _, _ := r.get("kind")
	ks, _ := kv.(string)
	return kv, ks
}

// fail records a failure at member key unless one is recorded already.
func (r *reader) fail(key string, code Violation, format string, args ...any) {
	if r.err == nil {
		r.err = errAt(field(r.path, key), code, format, args...)
	}
}

// member decodes the required member key with dec.
func member[T any](r *reader, key string, dec func(v any, path string) (T, error)) (t T) {
	if v, p, ok := r.get(key); ok {
		t, r.err = dec(v, p)
	}
	return t
}

// memberPtr is member for a pointer field: nil unless dec succeeded.
func memberPtr[T any](r *reader, key string, dec func(v any, path string) (T, error)) *T {
	t := member(r, key, dec)
	if r.err != nil {
		return nil
	}
	return &t
}

// optMember decodes the member key with dec when present and not null.
func optMember[T any](r *reader, key string, dec func(v any, path string) (T, error)) *T {
	v, p, ok := r.opt(key)
	if !ok {
		return nil
	}
	t, err := dec(v, p)
	if r.err = err; err != nil {
		return nil
	}
	return &t
}

func (r *reader) str(key, what string) string { return member(r, key, named(what, asString)) }

func (r *reader) ident(key, what string) string {
	return member(r, key, named(what, decodeIdentifier))
}

func (r *reader) stableRef(key, what string) string {
	return member(r, key, named(what, decodeStableRef))
}

func (r *reader) positive(key, what string) uint64 {
	return member(r, key, named(what, decodePositive))
}

func (r *reader) count(key string) uint64 { return member(r, key, named(key, decodeCount)) }

func (r *reader) fieldPath(key, what string) FieldPath {
	return member(r, key, named(what, decodeFieldPath))
}

func (r *reader) labelSet(key, what string) []string {
	return member(r, key, named(what, decodeLabelSet))
}

func (r *reader) payload(key string) PayloadType { return member(r, key, decodePayload) }

// oneOf reads a string member that must be one of allowed; the message
// lists them quoted.
func (r *reader) oneOf(key, what string, allowed ...string) string {
	s := r.str(key, what)
	if r.err == nil && !slices.Contains(allowed, s) {
		quoted := make([]string, len(allowed))
		for i, a := range allowed {
			quoted[i] = strconv.Quote(a)
		}
		list := quoted[len(quoted)-1]
		if len(quoted) > 1 {
			list = strings.Join(quoted[:len(quoted)-1], ", ") + " or " + list
		}
		r.fail(key, ViolationInvalidValue, "%s must be %s, got %q", what, list, clip(s))
	}
	return s
}
