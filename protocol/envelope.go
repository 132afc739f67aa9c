package protocol

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
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
		lit := string(raw)
		if strings.ContainsAny(lit, ".eE") {
			return ID{}, false
		}
		n, err := strconv.ParseInt(lit, 10, 64)
		if err != nil {
			return ID{}, false
		}
		return IntID(n), true
	}
	return ID{}, false
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

// Frame is one decoded inbound frame.
type Frame struct {
	Kind FrameKind
	// AdmissionID is set when the frame passed the "classified request"
	// test: jsonrpc (any string), id, method (string) and params each
	// present exactly once. Only such frames take part in duplicate-id
	// tracking and may establish subscriptions.
	AdmissionID *ID
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
func (f *Frame) Classified() bool { return f.AdmissionID != nil }

// Method names of the two client notifications.
const (
	MethodCancelRequest      = "$/cancelRequest"
	MethodSubscriptionCancel = "subscription/cancel"
)

// DecodeFrame classifies one inbound frame, checking in this order:
//
//  1. not valid UTF-8 JSON, or a \u escape of an unpaired UTF-16
//     surrogate anywhere: FrameParseError; not an object: FrameInvalid;
//  2. a $/cancelRequest notification (on every binding), then, for a frame
//     that is not a classified request, a subscription/cancel notification;
//  3. the classified-request test, which sets AdmissionID;
//  4. strict envelope validation, last value of a repeated member winning:
//     jsonrpc "2.0", a string method and a valid id make a FrameRequest,
//     anything else is FrameInvalid.
func DecodeFrame(data []byte) Frame {
	// Bindings reject invalid UTF-8 before decoding; an in-process caller
	// that passes it gets a parse error, as serde_json would give.
	if !utf8.Valid(data) || !json.Valid(data) || HasLoneSurrogate(data) {
		return Frame{Kind: FrameParseError}
	}
	raw := trimSpace(data)
	if len(raw) == 0 || raw[0] != '{' {
		return Frame{Kind: FrameInvalid}
	}
	members, ok := ObjectMembers(raw)
	if !ok {
		return Frame{Kind: FrameParseError}
	}
	e := scanEnvelope(members)
	if e.notification(MethodCancelRequest) {
		if v, ok := singleParam(e.raw[envParams], "id"); ok {
			if cid, ok := parseID(v); ok {
				return Frame{Kind: FrameCancelRequest, CancelID: cid}
			}
		}
	}
	var admission *ID
	if e.shaped() && e.n[envID] == 1 {
		if id, ok := parseID(e.raw[envID]); ok {
			admission = &id
		}
	}
	if admission == nil && e.notification(MethodSubscriptionCancel) {
		if v, ok := singleParam(e.raw[envParams], "subscriptionId"); ok {
			if sid, ok := unquote(v); ok {
				return Frame{Kind: FrameSubscriptionCancel, SubscriptionID: sid}
			}
		}
	}
	f := Frame{Kind: FrameInvalid, AdmissionID: admission}
	if !e.jsonrpcIsStr || e.jsonrpc != JSONRPCVersion || !e.methodIsStr || e.n[envID] == 0 {
		return f
	}
	id, ok := parseID(e.raw[envID])
	if !ok {
		return f
	}
	f.Kind, f.ID, f.Method = FrameRequest, id, e.method
	if e.n[envParams] > 0 {
		f.Params = trimSpace(e.raw[envParams])
	}
	return f
}

// envelope is what DecodeFrame reads from a frame's members: how often each
// envelope member occurs (n) and its last value (raw), indexed like
// envelopeKeys.
type envelope struct {
	n                         [len(envelopeKeys)]int
	raw                       [len(envelopeKeys)]json.RawMessage
	jsonrpc, method           string
	jsonrpcIsStr, methodIsStr bool
}

var envelopeKeys = [...]string{"jsonrpc", "id", "method", "params"}

const (
	envJSONRPC = iota
	envID
	envMethod
	envParams
)

func scanEnvelope(members []Member) envelope {
	var e envelope
	for _, m := range members {
		if i := slices.Index(envelopeKeys[:], m.Key); i >= 0 {
			e.n[i]++
			e.raw[i] = m.Value
		}
	}
	e.jsonrpc, e.jsonrpcIsStr = unquote(e.raw[envJSONRPC])
	e.method, e.methodIsStr = unquote(e.raw[envMethod])
	return e
}

// shaped reports whether jsonrpc and method (both strings) and params occur
// exactly once: the shape of a notification, and with one id of a
// classified request.
func (e *envelope) shaped() bool {
	return e.n[envJSONRPC] == 1 && e.jsonrpcIsStr && e.n[envMethod] == 1 && e.methodIsStr && e.n[envParams] == 1
}

// notification reports whether the frame is shaped as a notification of
// method.
func (e *envelope) notification(method string) bool { return e.shaped() && e.method == method }

// singleParam returns the value of params when params is an object whose
// only member is key.
func singleParam(params json.RawMessage, key string) (json.RawMessage, bool) {
	pm, ok := ObjectMembers(trimSpace(params))
	if !ok || len(pm) != 1 || pm[0].Key != key {
		return nil, false
	}
	return pm[0].Value, true
}

// ObjectMembers splits a syntactically valid JSON object into its members in
// document order, keeping duplicates. It reports false for non-objects.
func ObjectMembers(raw []byte) ([]Member, bool) {
	raw = trimSpace(raw)
	if len(raw) < 2 || raw[0] != '{' {
		return nil, false
	}
	var out []Member
	i := skipSpace(raw, 1)
	if i < len(raw) && raw[i] == '}' {
		return out, true
	}
	for i < len(raw) {
		if raw[i] != '"' {
			return nil, false
		}
		end := skipString(raw, i)
		if end < 0 {
			return nil, false
		}
		key, ok := unquote(raw[i:end])
		if !ok {
			return nil, false
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		i = skipSpace(raw, i+1)
		vend := skipValue(raw, i)
		if vend < 0 {
			return nil, false
		}
		out = append(out, Member{Key: key, Value: raw[i:vend]})
		i = skipSpace(raw, vend)
		if i >= len(raw) {
			return nil, false
		}
		if raw[i] == '}' {
			return out, true
		}
		if raw[i] != ',' {
			return nil, false
		}
		i = skipSpace(raw, i+1)
	}
	return nil, false
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
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	simple := true
	for _, c := range inner {
		if c == '\\' || c == '"' || c < 0x20 {
			simple = false
			break
		}
	}
	if simple {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}
