package agentstream

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Claude Code's stream-json event types.
const (
	ClaudeSystem      = "system"
	ClaudeStreamEvent = "stream_event"
	ClaudeAssistant   = "assistant"
	ClaudeUser        = "user"
	ClaudeResult      = "result"
)

// Subtypes of a system event.
const (
	ClaudeInit     = "init"
	ClaudeAPIRetry = "api_retry"
)

// ClaudeEvent is one event of Claude Code's stream; the members other
// than Type are those of its type.
type ClaudeEvent struct {
	Type string
	// Subtype is a system or result event's subtype.
	Subtype string
	// Model is the model an init event names.
	Model string
	// Retry is an api_retry event.
	Retry ClaudeRetry
	// Delta is a stream_event.
	Delta ClaudeDelta
	// Content is an assistant message's blocks.
	Content []ClaudeBlock
	// ToolResults are the tool results a user message carries.
	ToolResults []ClaudeToolResult
	// Result is a result event.
	Result ClaudeOutcome
}

// ClaudeRetry is an API request Claude Code retries: the attempt of
// MaxRetries, the HTTP status that failed and its error.
type ClaudeRetry struct {
	Attempt, MaxRetries, Status int64
	Error                       string
}

// The kinds of a ClaudeDelta.
const (
	DeltaText     = "text"
	DeltaThinking = "thinking"
	// DeltaStop ends a content block.
	DeltaStop = "stop"
)

// ClaudeDelta is a stream_event: a piece of a text or thinking block
// (Kind DeltaText or DeltaThinking, Text the piece), the end of a block
// (DeltaStop), or anything else (Kind "").
type ClaudeDelta struct {
	Kind, Text string
}

// ClaudeBlock is one block of an assistant message: Type is text,
// thinking (Text is its text), tool_use or server_tool_use (a tool call:
// ID, Name and its Input as given), or another.
type ClaudeBlock struct {
	Type, Text, ID, Name string
	Input                json.RawMessage
}

// ClaudeToolResult is a tool_result block of a user message: the call it
// answers, whether it failed, and its content as given.
type ClaudeToolResult struct {
	ID      string
	IsError bool
	Content json.RawMessage
}

// ClaudeOutcome is the result event that ends a turn.
type ClaudeOutcome struct {
	Subtype string
	IsError bool
	// Answer is the result as given: a successful turn's answer is a
	// string.
	Answer json.RawMessage
	// Errors are the errors a failed result lists.
	Errors []string
	// Usage and Cost (total_cost_usd) are as given, nil when absent.
	Usage, Cost json.RawMessage
	// APIStatus is the HTTP status of the API error that ended the turn.
	APIStatus int64
}

// DecodeClaude reads an event of Decode's members m and type kind.
func DecodeClaude(m Fields, kind string) ClaudeEvent {
	e := ClaudeEvent{Type: kind}
	switch kind {
	case ClaudeSystem:
		e.Subtype, e.Model = Str(m["subtype"]), Str(m["model"])
		e.Retry = ClaudeRetry{Attempt: Int64(m["attempt"]), MaxRetries: Int64(m["max_retries"]), Status: Int64(m["error_status"]), Error: Str(m["error"])}
	case ClaudeStreamEvent:
		e.Delta = claudeDelta(Object(m["event"]))
	case ClaudeAssistant:
		e.Content = claudeContent(Object(m["message"]))
	case ClaudeUser:
		e.ToolResults = claudeToolResults(Object(m["message"]))
	case ClaudeResult:
		var errs []string
		_ = json.Unmarshal(m["errors"], &errs)
		e.Subtype = Str(m["subtype"])
		e.Result = ClaudeOutcome{Subtype: e.Subtype, IsError: Bool(m["is_error"]), Answer: m["result"], Errors: errs,
			Usage: m["usage"], Cost: m["total_cost_usd"], APIStatus: Int64(m["api_error_status"])}
	}
	return e
}

func claudeDelta(ev Fields) ClaudeDelta {
	switch Str(ev["type"]) {
	case "content_block_stop":
		return ClaudeDelta{Kind: DeltaStop}
	case "content_block_delta":
		d := Object(ev["delta"])
		switch Str(d["type"]) {
		case "text_delta":
			return ClaudeDelta{Kind: DeltaText, Text: Str(d["text"])}
		case "thinking_delta":
			return ClaudeDelta{Kind: DeltaThinking, Text: Str(d["thinking"])}
		}
	}
	return ClaudeDelta{}
}

func claudeContent(msg Fields) []ClaudeBlock {
	var out []ClaudeBlock
	for _, b := range Objects(msg["content"]) {
		block := ClaudeBlock{Type: Str(b["type"])}
		switch block.Type {
		case "text":
			block.Text = Str(b["text"])
		case "thinking":
			block.Text = Str(b["thinking"])
		case "tool_use", "server_tool_use":
			block.ID, block.Name, block.Input = Str(b["id"]), Str(b["name"]), b["input"]
		}
		out = append(out, block)
	}
	return out
}

func claudeToolResults(msg Fields) []ClaudeToolResult {
	var out []ClaudeToolResult
	for _, b := range Objects(msg["content"]) {
		if Str(b["type"]) == "tool_result" {
			out = append(out, ClaudeToolResult{ID: Str(b["tool_use_id"]), IsError: Bool(b["is_error"]), Content: b["content"]})
		}
	}
	return out
}

// Text is a tool result's content: a string, or the text of its blocks
// joined by newlines.
func (r ClaudeToolResult) Text() string {
	if s, ok := StrOK(r.Content); ok {
		return s
	}
	var parts []string
	for _, b := range Objects(r.Content) {
		if t, ok := StrOK(b["text"]); ok {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

// Failed reports whether the turn failed: a subtype other than success,
// or is_error.
func (o ClaudeOutcome) Failed() bool { return o.Subtype != "success" || o.IsError }

// ErrorText is the result's errors joined by "; ".
func (o ClaudeOutcome) ErrorText() string { return strings.Join(o.Errors, "; ") }

// Tokens is the result's usage with its cost, and whether the usage is an
// object. Input counts the cached input and the input written to the
// cache.
func (o ClaudeOutcome) Tokens() (Usage, bool) {
	u := Object(o.Usage)
	if u == nil {
		return Usage{}, false
	}
	cached := Int64(u["cache_read_input_tokens"])
	return Usage{Input: Int64(u["input_tokens"]) + cached + Int64(u["cache_creation_input_tokens"]), CachedInput: cached,
		Output: Int64(u["output_tokens"]), CostUSD: Float64(o.Cost)}, true
}

// SessionID is the session_id an event of Claude Code may carry, without
// surrounding spaces: present is false when the event has none, and a
// session_id that is not a string is an error.
func SessionID(m Fields) (id string, present bool, err error) {
	raw, ok := m["session_id"]
	if !ok {
		return "", false, nil
	}
	if err := json.Unmarshal(raw, &id); err != nil {
		return "", true, fmt.Errorf("session_id is not a string")
	}
	return strings.TrimSpace(id), true, nil
}
