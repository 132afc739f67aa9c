package graph

import (
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Decode strictly decodes a GraphSpec (§5). data may be a whole document or
// a json.RawMessage cut out of larger params. Every failure is a
// *DecodeError.
func Decode(data []byte) (*GraphSpec, error) {
	tree, err := parseJSON(data)
	if err != nil {
		return nil, errAt("$", ViolationMalformedJSON, "%v", err)
	}
	return decodeGraph(tree, "$")
}

// UnmarshalJSON lets a GraphSpec be a field of a larger params struct; it
// applies the same strict rules as Decode and fails with a *DecodeError.
func (g *GraphSpec) UnmarshalJSON(data []byte) error {
	d, err := Decode(data)
	if err != nil {
		return err
	}
	*g = *d
	return nil
}

// DecodePayloadType strictly decodes one PayloadType (§5.4).
func DecodePayloadType(data []byte) (PayloadType, error) {
	tree, err := parseJSON(data)
	if err != nil {
		return PayloadType{}, errAt("$", ViolationMalformedJSON, "%v", err)
	}
	return decodePayload(tree, "$")
}

// UnmarshalJSON applies DecodePayloadType.
func (p *PayloadType) UnmarshalJSON(data []byte) error {
	d, err := DecodePayloadType(data)
	if err != nil {
		return err
	}
	*p = d
	return nil
}

// --- generic helpers -------------------------------------------------------

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

func asObject(v any, path, what string, code Violation) (map[string]any, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errAt(path, code, "%s must be an object, got %s", what, jsonTypeName(v))
	}
	return obj, nil
}

// closed rejects the first (by byte order) key of obj not in allowed.
func closed(obj map[string]any, path, what string, code Violation, allowed ...string) error {
	var unknown []string
	for k := range obj {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return errAt(path, code, "unknown field %q in %s (allowed: %s)", unknown[0], what, strings.Join(allowed, ", "))
}

func need(obj map[string]any, key, path, what string) (any, error) {
	v, ok := obj[key]
	if !ok {
		return nil, errAt(path, ViolationMissingField, "%s is missing required field %q", what, key)
	}
	return v, nil
}

// optional returns (value, true) when key is present and not null; §1.5
// lists the fields whose explicit null means absent.
func optional(obj map[string]any, key string) (any, bool) {
	v, ok := obj[key]
	if !ok || v == nil {
		return nil, false
	}
	return v, true
}

func field(path, key string) string { return path + "." + key }

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func asString(v any, path, what string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", errAt(path, ViolationInvalidType, "%s must be a string, got %s", what, jsonTypeName(v))
	}
	return s, nil
}

func asArray(v any, path, what string) ([]any, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, errAt(path, ViolationInvalidType, "%s must be an array, got %s", what, jsonTypeName(v))
	}
	return a, nil
}

func nonEmptyList(v any, path, what string) ([]any, error) {
	a, err := asArray(v, path, what)
	if err != nil {
		return nil, err
	}
	if len(a) == 0 || len(a) > MaxNonEmptyListLen {
		return nil, errAt(path, ViolationInvalidCollection, "%s must have 1..%d items, got %d", what, MaxNonEmptyListLen, len(a))
	}
	return a, nil
}

// --- scalar rules of §2 ----------------------------------------------------

func isIdentChar(c byte, first bool) bool {
	switch {
	case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c == '_':
		return true
	case first:
		return false
	case c >= '0' && c <= '9', c == '.', c == '-':
		return true
	}
	return false
}

func identChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isIdentChar(s[i], i == 0) {
			return false
		}
	}
	return true
}

// IsIdentifier reports whether s is a valid NodeName/FieldName/EnumLabel:
// `^[A-Za-z_][A-Za-z0-9_.-]*$`, 1..MaxIdentifierBytes bytes (§2).
func IsIdentifier(s string) bool { return len(s) <= MaxIdentifierBytes && identChars(s) }

// IsStableRef reports whether s is a valid `name@version` stable reference
// (§2): at most MaxStableRefBytes bytes, split at the last '@', the name
// follows the identifier character rules, the version is decimal digits
// without a leading zero.
func IsStableRef(s string) bool {
	if len(s) > MaxStableRefBytes {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return false
	}
	name, version := s[:at], s[at+1:]
	if !identChars(name) || version == "" || version[0] == '0' {
		return false
	}
	for i := 0; i < len(version); i++ {
		if version[i] < '0' || version[i] > '9' {
			return false
		}
	}
	return true
}

func isControl(r rune) bool { return r <= 0x1f || (r >= 0x7f && r <= 0x9f) }

// IsBoundedString256 reports whether s has 1..256 Unicode scalar values and
// no control characters (§2).
func IsBoundedString256(s string) bool {
	n := utf8.RuneCountInString(s)
	if n < 1 || n > MaxBoundedString256Chars || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if isControl(r) {
			return false
		}
	}
	return true
}

// IsNodeInstructions reports whether s is valid NodeInstructions (§2): at
// most MaxInstructionsBytes bytes, no NUL, at least one non-whitespace char.
func IsNodeInstructions(s string) bool {
	if len(s) > MaxInstructionsBytes || strings.IndexByte(s, 0) >= 0 {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool { return !unicode.IsSpace(r) }) >= 0
}

func decodeIdentifier(v any, path, what string) (string, error) {
	s, err := asString(v, path, what)
	if err != nil {
		return "", err
	}
	if !IsIdentifier(s) {
		return "", errAt(path, ViolationInvalidIdentifier, "%s %q is not an identifier (^[A-Za-z_][A-Za-z0-9_.-]*$, 1..%d bytes)", what, clip(s), MaxIdentifierBytes)
	}
	return s, nil
}

func decodeStableRef(v any, path, what string) (string, error) {
	s, err := asString(v, path, what)
	if err != nil {
		return "", err
	}
	if !IsStableRef(s) {
		return "", errAt(path, ViolationInvalidStableRef, "%s %q is not a stable reference name@version (version without leading zero, at most %d bytes)", what, clip(s), MaxStableRefBytes)
	}
	return s, nil
}

// clip shortens a quoted echo of hostile input.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// decodeUint decodes an integer in [lo, MaxSafeInteger]; integral floats
// such as 3.0 are accepted as the reference does (§2).
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

func decodeFieldPath(v any, path, what string) (FieldPath, error) {
	a, err := asArray(v, path, what)
	if err != nil {
		return nil, err
	}
	if len(a) == 0 || len(a) > MaxFieldPathLen {
		return nil, errAt(path, ViolationInvalidPath, "%s must have 1..%d field names, got %d", what, MaxFieldPathLen, len(a))
	}
	p := make(FieldPath, len(a))
	for i, e := range a {
		if p[i], err = decodeIdentifier(e, index(path, i), "field name"); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func decodeFieldPaths(v any, path, what string) ([]FieldPath, error) {
	a, err := asArray(v, path, what)
	if err != nil {
		return nil, err
	}
	ps := make([]FieldPath, len(a))
	for i, e := range a {
		if ps[i], err = decodeFieldPath(e, index(path, i), "field path"); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// decodeLabelSet decodes a 1..MaxLabelSetLen set of unique labels and
// returns it sorted (§2).
func decodeLabelSet(v any, path, what string) ([]string, error) {
	a, err := asArray(v, path, what)
	if err != nil {
		return nil, err
	}
	if len(a) == 0 {
		return nil, errAt(path, ViolationEmptyEnum, "%s must not be empty", what)
	}
	if len(a) > MaxLabelSetLen {
		return nil, errAt(path, ViolationInvalidCollection, "%s must have at most %d labels, got %d", what, MaxLabelSetLen, len(a))
	}
	labels := make([]string, len(a))
	for i, e := range a {
		if labels[i], err = decodeIdentifier(e, index(path, i), "label"); err != nil {
			return nil, err
		}
	}
	sort.Strings(labels)
	for i := 1; i < len(labels); i++ {
		if labels[i] == labels[i-1] {
			return nil, errAt(path, ViolationDuplicateEnum, "%s contains duplicate label %q", what, labels[i])
		}
	}
	return labels, nil
}

// --- graph -----------------------------------------------------------------

func decodeGraph(v any, path string) (*GraphSpec, error) {
	obj, err := asObject(v, path, "graph", ViolationInvalidType)
	if err != nil {
		return nil, err
	}
	if err := closed(obj, path, "graph", ViolationUnknownField, "profile", "initialInput", "policy", "root"); err != nil {
		return nil, err
	}
	return decodeGraphFields(obj, path)
}

func decodeGraphFields(obj map[string]any, path string) (*GraphSpec, error) {
	g := &GraphSpec{}
	v, err := need(obj, "profile", path, "graph")
	if err != nil {
		return nil, err
	}
	if g.Profile, err = asString(v, field(path, "profile"), "profile"); err != nil {
		return nil, err
	}
	if g.Profile != ProfileFull && g.Profile != ProfileSingleWorker {
		return nil, errAt(field(path, "profile"), ViolationUnknownProfile, "unknown graph profile %q (expected %s or %s)", clip(g.Profile), ProfileFull, ProfileSingleWorker)
	}
	if v, err = need(obj, "initialInput", path, "graph"); err != nil {
		return nil, err
	}
	if g.InitialInput, err = decodePayload(v, field(path, "initialInput")); err != nil {
		return nil, err
	}
	if v, err = need(obj, "policy", path, "graph"); err != nil {
		return nil, err
	}
	if g.Policy, err = decodePolicy(v, field(path, "policy")); err != nil {
		return nil, err
	}
	if v, err = need(obj, "root", path, "graph"); err != nil {
		return nil, err
	}
	if g.Root, err = decodeNode(v, field(path, "root")); err != nil {
		return nil, err
	}
	return g, nil
}

func decodePolicy(v any, path string) (PolicyBinding, error) {
	var p PolicyBinding
	obj, err := asObject(v, path, "policy binding", ViolationInvalidType)
	if err != nil {
		return p, err
	}
	if err := closed(obj, path, "policy binding", ViolationUnknownField, "policy", "default"); err != nil {
		return p, err
	}
	if v, err = need(obj, "policy", path, "policy binding"); err != nil {
		return p, err
	}
	if p.Policy, err = decodeStableRef(v, field(path, "policy"), "policy reference"); err != nil {
		return p, err
	}
	if v, err = need(obj, "default", path, "policy binding"); err != nil {
		return p, err
	}
	if p.Default, err = asString(v, field(path, "default"), "policy default"); err != nil {
		return p, err
	}
	if p.Default != PolicyDefaultDeny {
		return p, errAt(field(path, "default"), ViolationInvalidValue, "policy default must be %q, got %q", PolicyDefaultDeny, clip(p.Default))
	}
	return p, nil
}

// --- payload types ---------------------------------------------------------

func decodePayload(v any, path string) (PayloadType, error) {
	var p PayloadType
	obj, err := asObject(v, path, "payload type", ViolationUnsafePayloadKind)
	if err != nil {
		return p, err
	}
	kv, ok := obj["kind"]
	if !ok {
		return p, errAt(path, ViolationUnsafePayloadKind, "payload type is missing its kind")
	}
	kind, ok := kv.(string)
	allowed := []string{"kind"}
	switch PayloadKind(kind) {
	case PayloadNull, PayloadBoolean, PayloadInteger, PayloadNumber, PayloadString:
	case PayloadRecord:
		allowed = append(allowed, "fields")
	case PayloadArray:
		allowed = append(allowed, "items")
	case PayloadEnum:
		allowed = append(allowed, "values")
	default:
		ok = false
	}
	if !ok {
		return p, errAt(field(path, "kind"), ViolationUnsafePayloadKind, "unknown payload kind %s (expected null, boolean, integer, number, string, record, array or enum)", quoteAny(kv))
	}
	p.Kind = PayloadKind(kind)
	if err := closed(obj, path, kind+" payload type", ViolationUnsafePayloadConstraint, allowed...); err != nil {
		return p, err
	}
	switch p.Kind {
	case PayloadRecord:
		fv, err := need(obj, "fields", path, "record payload type")
		if err != nil {
			return p, err
		}
		fpath := field(path, "fields")
		fobj, err := asObject(fv, fpath, "record fields", ViolationInvalidType)
		if err != nil {
			return p, err
		}
		p.Fields = make(map[string]RecordField, len(fobj))
		for _, name := range sortedKeys(fobj) {
			rpath := field(fpath, name)
			if !IsIdentifier(name) {
				return p, errAt(rpath, ViolationInvalidIdentifier, "record field name %q is not an identifier (^[A-Za-z_][A-Za-z0-9_.-]*$, 1..%d bytes)", clip(name), MaxIdentifierBytes)
			}
			rf, err := decodeRecordField(fobj[name], rpath)
			if err != nil {
				return p, err
			}
			p.Fields[name] = rf
		}
	case PayloadArray:
		iv, err := need(obj, "items", path, "array payload type")
		if err != nil {
			return p, err
		}
		items, err := decodePayload(iv, field(path, "items"))
		if err != nil {
			return p, err
		}
		p.Items = &items
	case PayloadEnum:
		vv, err := need(obj, "values", path, "enum payload type")
		if err != nil {
			return p, err
		}
		if p.Values, err = decodeLabelSet(vv, field(path, "values"), "enum values"); err != nil {
			return p, err
		}
	}
	return p, nil
}

func decodeRecordField(v any, path string) (RecordField, error) {
	var rf RecordField
	obj, err := asObject(v, path, "record field", ViolationInvalidType)
	if err != nil {
		return rf, err
	}
	if err := closed(obj, path, "record field", ViolationUnsafePayloadConstraint, "type", "required"); err != nil {
		return rf, err
	}
	tv, err := need(obj, "type", path, "record field")
	if err != nil {
		return rf, err
	}
	if rf.Type, err = decodePayload(tv, field(path, "type")); err != nil {
		return rf, err
	}
	rv, err := need(obj, "required", path, "record field")
	if err != nil {
		return rf, err
	}
	b, ok := rv.(bool)
	if !ok {
		return rf, errAt(field(path, "required"), ViolationInvalidType, "required must be a boolean, got %s", jsonTypeName(rv))
	}
	rf.Required = b
	return rf, nil
}

func quoteAny(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(clip(s))
	}
	return jsonTypeName(v)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// --- selectors, bindings, guards ------------------------------------------

func decodeDataSelector(v any, path string) (DataSelector, error) {
	var s DataSelector
	obj, err := asObject(v, path, "data selector", ViolationStringSelector)
	if err != nil {
		return s, err
	}
	if err := closed(obj, path, "data selector", ViolationUnknownField, "source", "path"); err != nil {
		return s, err
	}
	sv, err := need(obj, "source", path, "data selector")
	if err != nil {
		return s, err
	}
	src, err := asString(sv, field(path, "source"), "data selector source")
	if err != nil {
		return s, err
	}
	if s.Source = DataSource(src); s.Source != SourceState && s.Source != SourceItem {
		return s, errAt(field(path, "source"), ViolationInvalidValue, "data selector source must be \"state\" or \"item\", got %q", clip(src))
	}
	pv, err := need(obj, "path", path, "data selector")
	if err != nil {
		return s, err
	}
	s.Path, err = decodeFieldPath(pv, field(path, "path"), "selector path")
	return s, err
}

func decodeInputBindings(v any, path string) ([]InputBinding, error) {
	a, err := asArray(v, path, "input bindings")
	if err != nil {
		return nil, err
	}
	bs := make([]InputBinding, len(a))
	for i, e := range a {
		p := index(path, i)
		obj, err := asObject(e, p, "input binding", ViolationInvalidType)
		if err != nil {
			return nil, err
		}
		if err := closed(obj, p, "input binding", ViolationUnknownField, "target", "value"); err != nil {
			return nil, err
		}
		tv, err := need(obj, "target", p, "input binding")
		if err != nil {
			return nil, err
		}
		if bs[i].Target, err = decodeFieldPath(tv, field(p, "target"), "binding target"); err != nil {
			return nil, err
		}
		vv, err := need(obj, "value", p, "input binding")
		if err != nil {
			return nil, err
		}
		if bs[i].Value, err = decodeDataSelector(vv, field(p, "value")); err != nil {
			return nil, err
		}
	}
	return bs, nil
}

func decodeWriteBindings(v any, path string) ([]WriteBinding, error) {
	a, err := asArray(v, path, "write bindings")
	if err != nil {
		return nil, err
	}
	bs := make([]WriteBinding, len(a))
	for i, e := range a {
		p := index(path, i)
		obj, err := asObject(e, p, "write binding", ViolationInvalidType)
		if err != nil {
			return nil, err
		}
		if err := closed(obj, p, "write binding", ViolationUnknownField, "value", "target"); err != nil {
			return nil, err
		}
		vv, err := need(obj, "value", p, "write binding")
		if err != nil {
			return nil, err
		}
		if bs[i].Value, err = decodeOutputSelector(vv, field(p, "value")); err != nil {
			return nil, err
		}
		tv, err := need(obj, "target", p, "write binding")
		if err != nil {
			return nil, err
		}
		if bs[i].Target, err = decodeFieldPath(tv, field(p, "target"), "binding target"); err != nil {
			return nil, err
		}
	}
	return bs, nil
}

func decodeOutputSelector(v any, path string) (NodeOutputSelector, error) {
	var s NodeOutputSelector
	obj, err := asObject(v, path, "node output selector", ViolationStringSelector)
	if err != nil {
		return s, err
	}
	if err := closed(obj, path, "node output selector", ViolationUnknownField, "node", "channel", "path"); err != nil {
		return s, err
	}
	nv, err := need(obj, "node", path, "node output selector")
	if err != nil {
		return s, err
	}
	if s.Node, err = decodeIdentifier(nv, field(path, "node"), "node name"); err != nil {
		return s, err
	}
	cv, err := need(obj, "channel", path, "node output selector")
	if err != nil {
		return s, err
	}
	ch, err := asString(cv, field(path, "channel"), "channel")
	if err != nil {
		return s, err
	}
	switch s.Channel = OutputChannel(ch); s.Channel {
	case ChannelOut, ChannelSignal, ChannelDiagnostic:
	default:
		return s, errAt(field(path, "channel"), ViolationInvalidValue, "channel must be \"out\", \"signal\" or \"diagnostic\", got %q", clip(ch))
	}
	pv, err := need(obj, "path", path, "node output selector")
	if err != nil {
		return s, err
	}
	s.Path, err = decodeFieldPath(pv, field(path, "path"), "selector path")
	return s, err
}

func decodeControlSelector(v any, path string) (ControlSelector, error) {
	var s ControlSelector
	obj, err := asObject(v, path, "control selector", ViolationStringSelector)
	if err != nil {
		return s, err
	}
	if err := closed(obj, path, "control selector", ViolationUnknownField, "name", "source", "field"); err != nil {
		return s, err
	}
	nv, err := need(obj, "name", path, "control selector")
	if err != nil {
		return s, err
	}
	if s.Name, err = decodeIdentifier(nv, field(path, "name"), "node name"); err != nil {
		return s, err
	}
	sv, err := need(obj, "source", path, "control selector")
	if err != nil {
		return s, err
	}
	src, err := asString(sv, field(path, "source"), "control source")
	if err != nil {
		return s, err
	}
	switch s.Source = ControlSource(src); s.Source {
	case ControlSignal, ControlError, ControlGroup:
	default:
		return s, errAt(field(path, "source"), ViolationInvalidValue, "control source must be \"signal\", \"error\" or \"group\", got %q", clip(src))
	}
	if fv, ok := optional(obj, "field"); ok {
		f, err := decodeIdentifier(fv, field(path, "field"), "control field")
		if err != nil {
			return s, err
		}
		s.Field = &f
	}
	return s, nil
}

func decodeGuard(v any, path string) (Guard, error) {
	var g Guard
	obj, err := asObject(v, path, "guard", ViolationExecutableGuard)
	if err != nil {
		return g, err
	}
	kv, ok := obj["kind"]
	if !ok {
		return g, errAt(path, ViolationExecutableGuard, "guard is missing its kind")
	}
	kind, _ := kv.(string)
	var allowed []string
	switch g.Kind = GuardKind(kind); g.Kind {
	case GuardIn:
		allowed = []string{"kind", "value", "labels"}
	case GuardAll, GuardAny:
		allowed = []string{"kind", "guards"}
	case GuardNot:
		allowed = []string{"kind", "guard"}
	case GuardKOfN:
		allowed = []string{"kind", "count", "values", "labels"}
	case GuardKOfMap:
		allowed = []string{"kind", "count", "value", "labels"}
	default:
		return g, errAt(field(path, "kind"), ViolationExecutableGuard, "unknown guard kind %s (expected in, all, any, not, k_of_n or k_of_map)", quoteAny(kv))
	}
	what := kind + " guard"
	if err := closed(obj, path, what, ViolationExecutableGuard, allowed...); err != nil {
		return g, err
	}
	get := func(key string) (any, error) { return need(obj, key, path, what) }
	if g.Kind == GuardKOfN || g.Kind == GuardKOfMap {
		cv, err := get("count")
		if err != nil {
			return g, err
		}
		if g.Count, err = decodePositive(cv, field(path, "count"), "guard count"); err != nil {
			return g, err
		}
	}
	switch g.Kind {
	case GuardIn, GuardKOfMap:
		vv, err := get("value")
		if err != nil {
			return g, err
		}
		sel, err := decodeControlSelector(vv, field(path, "value"))
		if err != nil {
			return g, err
		}
		g.Value = &sel
	case GuardAll, GuardAny:
		gv, err := get("guards")
		if err != nil {
			return g, err
		}
		a, err := nonEmptyList(gv, field(path, "guards"), "guard operands")
		if err != nil {
			return g, err
		}
		g.Guards = make([]Guard, len(a))
		for i, e := range a {
			if g.Guards[i], err = decodeGuard(e, index(field(path, "guards"), i)); err != nil {
				return g, err
			}
		}
	case GuardNot:
		gv, err := get("guard")
		if err != nil {
			return g, err
		}
		inner, err := decodeGuard(gv, field(path, "guard"))
		if err != nil {
			return g, err
		}
		g.Inner = &inner
	case GuardKOfN:
		vv, err := get("values")
		if err != nil {
			return g, err
		}
		a, err := nonEmptyList(vv, field(path, "values"), "guard selectors")
		if err != nil {
			return g, err
		}
		g.Values = make([]ControlSelector, len(a))
		for i, e := range a {
			if g.Values[i], err = decodeControlSelector(e, index(field(path, "values"), i)); err != nil {
				return g, err
			}
		}
	}
	if g.Kind != GuardAll && g.Kind != GuardAny && g.Kind != GuardNot {
		lv, err := get("labels")
		if err != nil {
			return g, err
		}
		if g.Labels, err = decodeLabelSet(lv, field(path, "labels"), "guard labels"); err != nil {
			return g, err
		}
	}
	return g, nil
}

func decodeJoin(v any, path string) (Join, error) {
	var j Join
	obj, err := asObject(v, path, "join", ViolationInvalidType)
	if err != nil {
		return j, err
	}
	kv, err := need(obj, "kind", path, "join")
	if err != nil {
		return j, err
	}
	kind, _ := kv.(string)
	switch j.Kind = JoinKind(kind); j.Kind {
	case JoinAll, JoinAny:
		err = closed(obj, path, kind+" join", ViolationUnknownField, "kind")
	case JoinQuorum:
		if err = closed(obj, path, "quorum join", ViolationUnknownField, "kind", "count"); err == nil {
			var cv any
			if cv, err = need(obj, "count", path, "quorum join"); err == nil {
				j.Count, err = decodePositive(cv, field(path, "count"), "quorum count")
			}
		}
	case JoinFirst:
		if err = closed(obj, path, "first join", ViolationUnknownField, "kind", "when"); err == nil {
			var wv any
			if wv, err = need(obj, "when", path, "first join"); err == nil {
				var w Guard
				if w, err = decodeGuard(wv, field(path, "when")); err == nil {
					j.When = &w
				}
			}
		}
	default:
		err = errAt(field(path, "kind"), ViolationInvalidValue, "unknown join kind %s (expected all, any, quorum or first)", quoteAny(kv))
	}
	return j, err
}

// --- nodes -----------------------------------------------------------------

var nodeFields = map[NodeKind][]string{
	KindStep:     {"kind", "name", "worker", "instructions", "input", "output", "inputBindings", "writeBindings", "timeoutMs", "attempts"},
	KindVerifier: {"kind", "name", "worker", "input", "output", "inputBindings", "writeBindings", "timeoutMs", "attempts", "signals", "diagnostic", "instructions"},
	KindSeq:      {"kind", "name", "state", "children", "promotedStatePaths"},
	KindChoice:   {"kind", "name", "state", "branches", "otherwise", "promotedStatePaths"},
	KindPar:      {"kind", "name", "state", "branches", "promotedStatePaths", "join"},
	KindLoop:     {"kind", "name", "state", "body", "until", "maxIterations", "promotedStatePaths"},
	KindMap:      {"kind", "name", "state", "body", "over", "maxItems", "promotedStatePaths"},
	KindSucceed:  {"kind", "name", "output", "bindings"},
	KindFail:     {"kind", "name", "reason"},
}

// nodeReader decodes the fields of one node object, stopping at the first
// error so the field-by-field code stays linear.
type nodeReader struct {
	obj  map[string]any
	path string
	what string
	err  error
}

func (r *nodeReader) get(key string) (any, string, bool) {
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

func (r *nodeReader) ident(key, what string) string {
	v, p, ok := r.get(key)
	if !ok {
		return ""
	}
	s, err := decodeIdentifier(v, p, what)
	r.err = err
	return s
}

func (r *nodeReader) payload(key string) PayloadType {
	v, p, ok := r.get(key)
	if !ok {
		return PayloadType{}
	}
	t, err := decodePayload(v, p)
	r.err = err
	return t
}

func (r *nodeReader) positive(key string) uint64 {
	v, p, ok := r.get(key)
	if !ok {
		return 0
	}
	u, err := decodePositive(v, p, key)
	r.err = err
	return u
}

func (r *nodeReader) node(key string) Node {
	v, p, ok := r.get(key)
	if !ok {
		return nil
	}
	n, err := decodeNode(v, p)
	r.err = err
	return n
}

func (r *nodeReader) nodes(key string) []Node {
	v, p, ok := r.get(key)
	if !ok {
		return nil
	}
	a, err := nonEmptyList(v, p, key)
	if err != nil {
		r.err = err
		return nil
	}
	ns := make([]Node, len(a))
	for i, e := range a {
		if ns[i], r.err = decodeNode(e, index(p, i)); r.err != nil {
			return nil
		}
	}
	return ns
}

func (r *nodeReader) promoted() []FieldPath {
	v, p, ok := r.get("promotedStatePaths")
	if !ok {
		return nil
	}
	ps, err := decodeFieldPaths(v, p, "promotedStatePaths")
	r.err = err
	return ps
}

func (r *nodeReader) inputBindings(key string) []InputBinding {
	v, p, ok := r.get(key)
	if !ok {
		return nil
	}
	bs, err := decodeInputBindings(v, p)
	r.err = err
	return bs
}

func (r *nodeReader) writeBindings() []WriteBinding {
	v, p, ok := r.get("writeBindings")
	if !ok {
		return nil
	}
	bs, err := decodeWriteBindings(v, p)
	r.err = err
	return bs
}

func (r *nodeReader) instructions() *string {
	if r.err != nil {
		return nil
	}
	v, ok := optional(r.obj, "instructions")
	if !ok {
		return nil
	}
	p := field(r.path, "instructions")
	s, err := asString(v, p, "instructions")
	if err != nil {
		r.err = err
		return nil
	}
	if !IsNodeInstructions(s) {
		r.err = errAt(p, ViolationInvalidString, "instructions must be at most %d bytes, contain a non-whitespace character and no NUL", MaxInstructionsBytes)
		return nil
	}
	return &s
}

func (r *nodeReader) signals() map[string][]string {
	v, p, ok := r.get("signals")
	if !ok {
		return nil
	}
	obj, err := asObject(v, p, "signals", ViolationInvalidType)
	if err != nil {
		r.err = err
		return nil
	}
	sig := make(map[string][]string, len(obj))
	for _, k := range sortedKeys(obj) {
		kp := field(p, k)
		if !IsIdentifier(k) {
			r.err = errAt(kp, ViolationInvalidIdentifier, "signal field %q is not an identifier", clip(k))
			return nil
		}
		if sig[k], r.err = decodeLabelSet(obj[k], kp, "signal labels"); r.err != nil {
			return nil
		}
	}
	return sig
}

func decodeNode(v any, path string) (Node, error) {
	obj, err := asObject(v, path, "graph node", ViolationUnknownNode)
	if err != nil {
		return nil, err
	}
	kv, ok := obj["kind"]
	if !ok {
		return nil, errAt(path, ViolationUnknownNode, "graph node is missing its kind")
	}
	ks, _ := kv.(string)
	kind := NodeKind(ks)
	allowed, ok := nodeFields[kind]
	if !ok {
		return nil, errAt(field(path, "kind"), ViolationUnknownNode, "unknown node kind %s (expected step, verifier, seq, choice, par, loop, map, succeed or fail)", quoteAny(kv))
	}
	what := ks + " node"
	unknownCode := ViolationUnknownField
	if kind == KindStep || kind == KindVerifier {
		// Extra keys on executables are where commands, endpoints and
		// credentials would be smuggled in.
		unknownCode = ViolationForbiddenWorkerField
	}
	if err := closed(obj, path, what, unknownCode, allowed...); err != nil {
		return nil, err
	}
	r := &nodeReader{obj: obj, path: path, what: what}
	name := r.ident("name", "node name")
	var n Node
	switch kind {
	case KindStep:
		s := &Step{Name: name}
		if wv, p, ok := r.get("worker"); ok {
			s.Worker, r.err = decodeStableRef(wv, p, "worker reference")
		}
		s.Instructions = r.instructions()
		s.Input = r.payload("input")
		s.Output = r.payload("output")
		s.InputBindings = r.inputBindings("inputBindings")
		s.WriteBindings = r.writeBindings()
		s.TimeoutMs = r.positive("timeoutMs")
		s.Attempts = r.positive("attempts")
		n = s
	case KindVerifier:
		s := &Verifier{Name: name}
		if wv, p, ok := r.get("worker"); ok {
			s.Worker, r.err = decodeStableRef(wv, p, "worker reference")
		}
		s.Input = r.payload("input")
		s.Output = r.payload("output")
		s.InputBindings = r.inputBindings("inputBindings")
		s.WriteBindings = r.writeBindings()
		s.TimeoutMs = r.positive("timeoutMs")
		s.Attempts = r.positive("attempts")
		s.Signals = r.signals()
		s.Diagnostic = r.payload("diagnostic")
		s.Instructions = r.instructions()
		n = s
	case KindSeq:
		s := &Seq{Name: name}
		s.State = r.payload("state")
		s.Children = r.nodes("children")
		s.PromotedStatePaths = r.promoted()
		n = s
	case KindChoice:
		c := &Choice{Name: name}
		c.State = r.payload("state")
		if bv, p, ok := r.get("branches"); ok {
			c.Branches, r.err = decodeBranches(bv, p)
		}
		if r.err == nil {
			if ov, ok := optional(obj, "otherwise"); ok {
				c.Otherwise, r.err = decodeNode(ov, field(path, "otherwise"))
			}
		}
		c.PromotedStatePaths = r.promoted()
		n = c
	case KindPar:
		p := &Par{Name: name}
		p.State = r.payload("state")
		p.Branches = r.nodes("branches")
		p.PromotedStatePaths = r.promoted()
		if jv, jp, ok := r.get("join"); ok {
			p.Join, r.err = decodeJoin(jv, jp)
		}
		n = p
	case KindLoop:
		l := &Loop{Name: name}
		l.State = r.payload("state")
		l.Body = r.node("body")
		if r.err == nil {
			if uv, ok := optional(obj, "until"); ok {
				var g Guard
				if g, r.err = decodeGuard(uv, field(path, "until")); r.err == nil {
					l.Until = &g
				}
			}
		}
		l.MaxIterations = r.positive("maxIterations")
		l.PromotedStatePaths = r.promoted()
		n = l
	case KindMap:
		m := &Map{Name: name}
		m.State = r.payload("state")
		m.Body = r.node("body")
		if ov, p, ok := r.get("over"); ok {
			m.Over, r.err = decodeDataSelector(ov, p)
		}
		m.MaxItems = r.positive("maxItems")
		m.PromotedStatePaths = r.promoted()
		n = m
	case KindSucceed:
		s := &Succeed{Name: name}
		s.Output = r.payload("output")
		s.Bindings = r.inputBindings("bindings")
		n = s
	case KindFail:
		f := &Fail{Name: name}
		f.Reason = r.ident("reason", "fail reason")
		if r.err == nil && f.Reason == ReservedFailReason {
			r.err = errAt(field(path, "reason"), ViolationInvalidValue, "fail reason %q is reserved", ReservedFailReason)
		}
		n = f
	}
	if r.err != nil {
		return nil, r.err
	}
	return n, nil
}

func decodeBranches(v any, path string) ([]ChoiceBranch, error) {
	a, err := nonEmptyList(v, path, "choice branches")
	if err != nil {
		return nil, err
	}
	bs := make([]ChoiceBranch, len(a))
	for i, e := range a {
		p := index(path, i)
		obj, err := asObject(e, p, "choice branch", ViolationInvalidType)
		if err != nil {
			return nil, err
		}
		if err := closed(obj, p, "choice branch", ViolationUnknownField, "when", "node"); err != nil {
			return nil, err
		}
		wv, err := need(obj, "when", p, "choice branch")
		if err != nil {
			return nil, err
		}
		if bs[i].When, err = decodeGuard(wv, field(p, "when")); err != nil {
			return nil, err
		}
		nv, err := need(obj, "node", p, "choice branch")
		if err != nil {
			return nil, err
		}
		if bs[i].Node, err = decodeNode(nv, field(p, "node")); err != nil {
			return nil, err
		}
	}
	return bs, nil
}
