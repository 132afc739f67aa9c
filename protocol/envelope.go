package protocol

import (
	"encoding/json"
	"math"
	"strconv"
)

// ID is a JSON-RPC request id: a string or an integer literal that fits
// int64. "1" and 1 are distinct ids.
type ID struct {
	str   string
	num   int64
	isStr bool
}

// StringID returns the string id s.
func StringID(s string) ID { return ID{str: s, isStr: true} }

// IntID returns the integer id n.
func IntID(n int64) ID { return ID{num: n} }

// IsString reports whether the id is a JSON string.
func (id ID) IsString() bool { return id.isStr }

// String renders the id for logs and messages: strings quoted.
func (id ID) String() string {
	if id.isStr {
		return strconv.Quote(id.str)
	}
	return strconv.FormatInt(id.num, 10)
}

// Key is a comparable map key that keeps "1" and 1 apart.
type Key struct {
	s     string
	n     int64
	isStr bool
}

// Key returns the id's map key.
func (id ID) Key() Key { return Key{s: id.str, n: id.num, isStr: id.isStr} }

// AppendJSON appends the id as JSON, with the same type it arrived with.
func (id ID) AppendJSON(b []byte) []byte {
	if id.isStr {
		return AppendString(b, id.str)
	}
	return strconv.AppendInt(b, id.num, 10)
}

// MarshalJSON encodes the id.
func (id ID) MarshalJSON() ([]byte, error) { return id.AppendJSON(nil), nil }

// UnmarshalJSON decodes a valid id or fails.
func (id *ID) UnmarshalJSON(b []byte) error {
	v, ok := parseID(b)
	if !ok {
		return &json.UnsupportedValueError{Str: "invalid request id"}
	}
	*id = v
	return nil
}

// parseID classifies a raw JSON value as an id: a string, or an integer
// literal without fraction or exponent that fits int64.
func parseID(raw []byte) (ID, bool) {
	raw = trimSpace(raw)
	if len(raw) == 0 {
		return ID{}, false
	}
	switch c := raw[0]; {
	case c == '"':
		s, ok := unquote(raw)
		if !ok {
			return ID{}, false
		}
		return StringID(s), true
	case c == '-' || (c >= '0' && c <= '9'):
		n, ok := parseInt64(raw)
		return IntID(n), ok
	}
	return ID{}, false
}

// parseInt64 parses an optionally signed run of decimal digits that fits
// int64, without allocating.
func parseInt64(b []byte) (int64, bool) {
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' || u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	case neg && u <= 1<<63:
		return -int64(u), true // -1<<63 wraps to itself
	}
	return 0, false
}

// Member is one member of a JSON object, in document order, duplicates kept.
type Member struct {
	Key   string
	Value json.RawMessage
}

// FrameKind is what the inbound decoder made of a frame.
type FrameKind int

const (
	// FrameParseError: not JSON. Answer ParseErrorFrame, id null.
	FrameParseError FrameKind = iota
	// FrameCancelRequest: a recognised $/cancelRequest notification.
	FrameCancelRequest
	// FrameSubscriptionCancel: a recognised subscription/cancel notification.
	FrameSubscriptionCancel
	// FrameInvalid: fails strict envelope validation. Answer
	// InvalidRequestFrame with id null (after the duplicate-id check if
	// AdmissionID is set).
	FrameInvalid
	// FrameRequest: a valid request envelope.
	FrameRequest
)

// Frame is one decoded inbound frame. Its Params alias the decoded bytes.
type Frame struct {
	Kind FrameKind
	// Admitted is set when the frame passed the "classified request" test:
	// jsonrpc (any string), id, method (string) and params each present
	// exactly once; AdmissionID is then its id. Only such frames take part
	// in duplicate-id tracking and may establish subscriptions.
	Admitted    bool
	AdmissionID ID
	// ID, Method and Params are the last-wins envelope of a FrameRequest.
	ID     ID
	Method string
	// Params is nil when absent (treated as JSON null).
	Params json.RawMessage
	// CancelID is the target of a $/cancelRequest.
	CancelID ID
	// SubscriptionID is the target of a subscription/cancel.
	SubscriptionID string
}

// Classified reports whether the frame passed the classified-request test.
func (f *Frame) Classified() bool { return f.Admitted }

// Method names of the two client notifications.
const (
	MethodCancelRequest      = "$/cancelRequest"
	MethodSubscriptionCancel = "subscription/cancel"
)

// envelope is the top level of a request frame: how often each envelope
// member occurs and its last raw value.
type envelope struct {
	jsonrpcN, idN, methodN, paramsN int
	jsonrpc, id, method, params     []byte
}

// scan reads the members of the object raw; false when it is malformed.
func (e *envelope) scan(raw []byte) bool {
	it, ok := newObjectIter(raw)
	for ok {
		var key, val []byte
		if key, val, ok = it.next(); !ok {
			break
		}
		switch {
		case keyIs(key, "jsonrpc"):
			e.jsonrpcN++
			e.jsonrpc = val
		case keyIs(key, "id"):
			e.idN++
			e.id = val
		case keyIs(key, "method"):
			e.methodN++
			e.method = val
		case keyIs(key, "params"):
			e.paramsN++
			e.params = val
		}
	}
	return !it.bad
}

// notification reports whether the envelope is method name with
// jsonrpc, method and params each once and jsonrpc and method strings; it
// then returns the one member its params object must hold.
func (e *envelope) notification(name, member string) ([]byte, bool) {
	if e.jsonrpcN != 1 || e.methodN != 1 || e.paramsN != 1 || !isString(e.jsonrpc) || !stringIs(e.method, name) {
		return nil, false
	}
	it, ok := newObjectIter(e.params)
	if !ok {
		return nil, false
	}
	key, val, ok := it.next()
	if !ok || !keyIs(key, member) {
		return nil, false
	}
	if _, _, more := it.next(); more || it.bad {
		return nil, false
	}
	return val, true
}

// DecodeFrame classifies one inbound frame, checking in this order:
//
//  1. not valid UTF-8 JSON, or a \u escape of an unpaired UTF-16
//     surrogate anywhere: FrameParseError; not an object: FrameInvalid;
//  2. a $/cancelRequest notification (on every binding), then, for a frame
//     that is not a classified request, a subscription/cancel notification;
//  3. the classified-request test, which sets Admitted and AdmissionID;
//  4. strict envelope validation, last value of a repeated member winning:
//     jsonrpc "2.0", a string method and a valid id make a FrameRequest,
//     anything else is FrameInvalid.
//
// It allocates only for string ids, unknown method names and escaped
// member names.
func DecodeFrame(data []byte) Frame {
	// Bindings reject invalid UTF-8 before decoding; an in-process caller
	// that passes it gets a parse error, as serde_json would give.
	if !ValidFrame(data) {
		return Frame{Kind: FrameParseError}
	}
	raw := trimSpace(data)
	if len(raw) == 0 || raw[0] != '{' {
		return Frame{Kind: FrameInvalid}
	}
	var e envelope
	if !e.scan(raw) {
		return Frame{Kind: FrameParseError}
	}
	// Step 2a: $/cancelRequest, checked on every parsed frame.
	if v, ok := e.notification(MethodCancelRequest, "id"); ok {
		if cid, ok := parseID(v); ok {
			return Frame{Kind: FrameCancelRequest, CancelID: cid}
		}
	}
	// Step 3: the classified-request test.
	f := Frame{Kind: FrameInvalid}
	if e.jsonrpcN == 1 && isString(e.jsonrpc) && e.idN == 1 && e.methodN == 1 && isString(e.method) && e.paramsN == 1 {
		f.AdmissionID, f.Admitted = parseID(e.id)
	}
	// Step 2b: subscription/cancel, only for unclassified frames.
	if !f.Admitted {
		if v, ok := e.notification(MethodSubscriptionCancel, "subscriptionId"); ok {
			if sid, ok := unquote(v); ok {
				return Frame{Kind: FrameSubscriptionCancel, SubscriptionID: sid}
			}
		}
	}
	// Step 4: strict envelope validation, last value wins.
	if e.jsonrpcN == 0 || !stringIs(e.jsonrpc, JSONRPCVersion) || e.methodN == 0 || !isString(e.method) || e.idN == 0 {
		return f
	}
	id, ok := parseID(e.id)
	if !ok {
		return f
	}
	f.Kind, f.ID, f.Method = FrameRequest, id, methodName(e.method)
	if e.paramsN > 0 {
		f.Params = trimSpace(e.params)
	}
	return f
}

// methodName is the method a raw JSON string names: the registry's own
// string for a known method, so that decoding it allocates nothing.
func methodName(raw []byte) string {
	if in, ok := simpleString(raw); ok {
		if m, known := methodIndex[string(in)]; known {
			return m.Name
		}
	}
	s, _ := unquote(raw)
	return s
}

// ObjectMembers splits a syntactically valid JSON object into its members in
// document order, keeping duplicates. It reports false for non-objects.
func ObjectMembers(raw []byte) ([]Member, bool) {
	it, ok := newObjectIter(raw)
	if !ok {
		return nil, false
	}
	var out []Member
	for {
		key, val, ok := it.next()
		if !ok {
			break
		}
		k, ok := unquote(key)
		if !ok {
			return nil, false
		}
		out = append(out, Member{Key: k, Value: val})
	}
	if it.bad {
		return nil, false
	}
	return out, true
}

// objectIter walks the members of a JSON object without allocating.
type objectIter struct {
	raw  []byte
	i    int  // the next member, or the closing brace
	more bool // a ',' was read: a member must follow
	bad  bool // the object is malformed
}

// newObjectIter starts at the first member of raw; false for non-objects.
func newObjectIter(raw []byte) (objectIter, bool) {
	raw = trimSpace(raw)
	if len(raw) < 2 || raw[0] != '{' {
		return objectIter{}, false
	}
	return objectIter{raw: raw, i: skipSpace(raw, 1)}, true
}

// next returns the next member's raw (quoted) key and its value; false at
// the end of the object or when it is malformed (bad is then set).
func (it *objectIter) next() (key, val []byte, ok bool) {
	raw, i := it.raw, it.i
	if i < len(raw) && raw[i] == '}' && !it.more {
		return nil, nil, false
	}
	end := -1
	if i < len(raw) && raw[i] == '"' {
		end = skipString(raw, i)
	}
	if end < 0 {
		it.bad = true
		return nil, nil, false
	}
	key = raw[i:end]
	i = skipSpace(raw, end)
	if i >= len(raw) || raw[i] != ':' {
		it.bad = true
		return nil, nil, false
	}
	i = skipSpace(raw, i+1)
	vend := skipValue(raw, i)
	if vend < 0 {
		it.bad = true
		return nil, nil, false
	}
	val = raw[i:vend]
	i = skipSpace(raw, vend)
	switch {
	case i < len(raw) && raw[i] == '}':
		it.i, it.more = i, false
	case i < len(raw) && raw[i] == ',':
		it.i, it.more = skipSpace(raw, i+1), true
	default:
		it.bad = true
		return nil, nil, false
	}
	return key, val, true
}

// keyIs reports whether the raw member name key is name.
func keyIs(key []byte, name string) bool {
	if in, ok := simpleString(key); ok {
		return string(in) == name
	}
	s, ok := unquote(key)
	return ok && s == name
}

// stringIs reports whether the raw value is the JSON string s.
func stringIs(raw []byte, s string) bool { return keyIs(trimSpace(raw), s) }

// isString reports whether the raw value is a JSON string.
func isString(raw []byte) bool {
	raw = trimSpace(raw)
	return len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"'
}

// simpleString returns the inside of a raw JSON string with nothing
// escaped; false for anything else.
func simpleString(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	inner := raw[1 : len(raw)-1]
	for _, c := range inner {
		if c == '\\' || c == '"' || c < 0x20 {
			return nil, false
		}
	}
	return inner, true
}

func trimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i]=='"'.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index just past the (valid) JSON value at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j)
				if j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && !isSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
			j++
		}
		return j
	}
}

// unquote decodes a raw JSON string; it reports false for anything else.
func unquote(raw []byte) (string, bool) {
	raw = trimSpace(raw)
	if in, ok := simpleString(raw); ok {
		return string(in), true
	}
	if !isString(raw) {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}
