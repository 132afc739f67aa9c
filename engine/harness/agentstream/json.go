// Package agentstream reads the JSONL event streams of the agent CLIs the
// harness runs: Codex's `exec --json` events and Claude Code's
// stream-json events. It is the one place that knows their shapes: it
// decodes one line into its members and type, and each CLI's events into
// typed values (items, tool calls and results, usage, the session or
// thread id, the final answer, errors). It decides nothing: the drivers
// (engine/harness) judge a turn from these values, and the run export
// (runs/export) writes its semantic view from them. It imports nothing
// of oecp, so both can import it.
package agentstream

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// Fields is one JSON object of a stream, its members undecoded.
type Fields = map[string]json.RawMessage

// Why a line is no event. Decode's errors are these, as they are.
var (
	ErrNotUTF8   = errors.New("an event is not UTF-8")
	ErrNotObject = errors.New("an event is not a JSON object")
	ErrNoType    = errors.New("an event has no string type")
)

// Decode reads one line as an event: its members and its "type". A line
// that is not UTF-8 or not a JSON object (null included) is ErrNotUTF8 or
// ErrNotObject; an object whose type is missing or not a string is
// ErrNoType, and its members are still returned.
func Decode(line []byte) (Fields, string, error) {
	if !utf8.Valid(line) {
		return nil, "", ErrNotUTF8
	}
	var m Fields
	if err := json.Unmarshal(line, &m); err != nil || m == nil {
		return nil, "", ErrNotObject
	}
	kind, ok := StrOK(m["type"])
	if !ok {
		return m, "", ErrNoType
	}
	return m, kind, nil
}

// StrOK is a JSON string member and whether it is one (absent, or a value
// of another type, is "", false; null is "", true).
func StrOK(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Str is a JSON string member, or "" when absent or of another type.
func Str(raw json.RawMessage) string {
	s, _ := StrOK(raw)
	return s
}

// Object is a JSON object member, or nil when absent or of another type.
func Object(raw json.RawMessage) Fields {
	var m Fields
	_ = json.Unmarshal(raw, &m)
	return m
}

// Objects is a JSON array member of objects, or nil when absent or of
// another type.
func Objects(raw json.RawMessage) []Fields {
	var bs []Fields
	_ = json.Unmarshal(raw, &bs)
	return bs
}

// Bool is a JSON boolean member, false when absent or of another type.
func Bool(raw json.RawMessage) bool {
	var b bool
	_ = json.Unmarshal(raw, &b)
	return b
}

// Int64 is a JSON number member as an int64 (0 when absent or not a
// number).
func Int64(raw json.RawMessage) int64 {
	return int64(Float64(raw))
}

// Float64 is a JSON number member (0 when absent or not a number).
func Float64(raw json.RawMessage) float64 {
	var f float64
	_ = json.Unmarshal(raw, &f)
	return f
}

// Text is a JSON value as text: a string's content, else its JSON.
func Text(raw json.RawMessage) string {
	if s, ok := StrOK(raw); ok {
		return s
	}
	return string(raw)
}

// Usage is what a CLI reported a turn consumed. Input counts every input
// token, cached ones included; CachedInput is the cached part. CostUSD is
// the provider-side cost the CLI reported (Claude Code does, Codex does
// not: zero). Its JSON form is the one the harness records.
type Usage struct {
	Input       int64   `json:"input"`
	CachedInput int64   `json:"cachedInput"`
	Output      int64   `json:"output"`
	Reasoning   int64   `json:"reasoning"`
	CostUSD     float64 `json:"costUsd"`
}
