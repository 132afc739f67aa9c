package export

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// parser reads one process's stdout lines: Codex's `exec --json` events,
// Claude's stream-json events, or the one {"session","text"} reply of a
// command harness. The two CLIs' event types do not overlap, so each line
// says which it is. A line that is not a JSON object is unreadable; an
// event of a type no mapping reads (progress, partial deltas, session
// notices) yields nothing. calls are the tool call ids already reported.
type parser struct {
	exec    string
	turn    int
	calls   map[string]bool
	lastMsg string
}

type obj = map[string]json.RawMessage

// line maps one line to its events; ok is false for an unreadable line.
func (p *parser) line(line []byte) (evs []Event, ok bool) {
	if !utf8.Valid(line) {
		return nil, false
	}
	var m obj
	if err := json.Unmarshal(line, &m); err != nil || m == nil {
		return nil, false
	}
	kind, hasType := str(m["type"])
	if !hasType {
		if text, isReply := str(m["text"]); isReply {
			return []Event{p.text("text", text), p.result("success", text)}, true
		}
		return nil, false
	}
	switch kind {
	case "item.started", "item.updated", "item.completed":
		return p.codexItem(kind, object(m["item"])), true
	case "turn.completed":
		var out []Event
		if u, ok := m["usage"]; ok {
			out = append(out, p.usage(u, nil))
		}
		return append(out, p.result("success", p.lastMsg)), true
	case "turn.failed":
		msg, _ := str(object(m["error"])["message"])
		return []Event{p.result("failed", msg)}, true
	case "assistant":
		return p.claudeContent(object(m["message"])), true
	case "user":
		return p.claudeResults(object(m["message"])), true
	case "result":
		return p.claudeResult(m), true
	}
	return nil, true
}

func (p *parser) ev(kind string) Event { return Event{Type: kind, Execution: p.exec, Turn: p.turn} }

func (p *parser) text(kind, text string) Event {
	e := p.ev(kind)
	e.Text, e.Truncated = bounded(text)
	return e
}

func (p *parser) result(status, text string) Event {
	e := p.text("result", text)
	e.Status = status
	return e
}

func (p *parser) usage(u, cost json.RawMessage) Event {
	e := p.ev("usage")
	e.Usage, e.Truncated = boundedJSON(u)
	e.CostUSD = cost
	return e
}

func (p *parser) call(id, name string, input json.RawMessage) Event {
	e := p.ev("tool_call")
	e.ID, e.Name = id, name
	e.Input, e.Truncated = boundedJSON(input)
	p.calls[id] = true
	return e
}

func (p *parser) callResult(id, output string, isError bool) Event {
	e := p.ev("tool_result")
	e.ID, e.IsError = id, isError
	e.Output, e.Truncated = bounded(output)
	return e
}

// codexItem maps an item event: a completed agent message is text, a
// completed reasoning item thinking; a tool item (a command, an MCP tool
// call, a file change, a web search, …) is a tool call when first seen and
// a tool result when completed.
func (p *parser) codexItem(event string, item obj) []Event {
	kind, _ := str(item["type"])
	id, _ := str(item["id"])
	completed := event == "item.completed"
	switch kind {
	case "agent_message":
		if !completed {
			return nil
		}
		text, _ := str(item["text"])
		p.lastMsg = text
		return []Event{p.text("text", text)}
	case "reasoning":
		if !completed {
			return nil
		}
		text, _ := str(item["text"])
		return []Event{p.text("thinking", text)}
	case "", "todo_list", "error":
		return nil
	}
	var out []Event
	if !p.calls[id] {
		name, input := codexCall(kind, item)
		out = append(out, p.call(id, name, input))
	}
	if completed {
		output, isError := codexResult(kind, item)
		out = append(out, p.callResult(id, output, isError))
	}
	return out
}

// codexCall is a tool item's name and input.
func codexCall(kind string, item obj) (string, json.RawMessage) {
	pick := func(keys ...string) json.RawMessage {
		in := obj{}
		for _, k := range keys {
			if v, ok := item[k]; ok {
				in[k] = v
			}
		}
		b, _ := json.Marshal(in)
		return b
	}
	switch kind {
	case "command_execution":
		return kind, pick("command")
	case "mcp_tool_call":
		server, _ := str(item["server"])
		tool, _ := str(item["tool"])
		return server + "/" + tool, item["arguments"]
	case "file_change":
		return kind, pick("changes")
	case "web_search":
		return kind, pick("query")
	}
	rest := obj{}
	for k, v := range item {
		if k != "id" && k != "type" && k != "status" {
			rest[k] = v
		}
	}
	b, _ := json.Marshal(rest)
	return kind, b
}

// codexResult is a completed tool item's output and whether it failed.
func codexResult(kind string, item obj) (string, bool) {
	status, _ := str(item["status"])
	failed := status == "failed" || status == "declined"
	if msg, ok := str(object(item["error"])["message"]); ok {
		return msg, true
	}
	switch kind {
	case "command_execution":
		out, _ := str(item["aggregated_output"])
		var code *int
		_ = json.Unmarshal(item["exit_code"], &code)
		return out, failed || (code != nil && *code != 0)
	case "mcp_tool_call":
		return rawText(item["result"]), failed
	}
	return status, failed
}

// claudeContent maps an assistant message's blocks: text, thinking and
// tool calls.
func (p *parser) claudeContent(msg obj) []Event {
	var out []Event
	for _, b := range blocks(msg["content"]) {
		kind, _ := str(b["type"])
		switch kind {
		case "text":
			text, _ := str(b["text"])
			out = append(out, p.text("text", text))
		case "thinking":
			text, _ := str(b["thinking"])
			out = append(out, p.text("thinking", text))
		case "tool_use", "server_tool_use":
			id, _ := str(b["id"])
			name, _ := str(b["name"])
			out = append(out, p.call(id, name, b["input"]))
		}
	}
	return out
}

// claudeResults maps a user message's tool results.
func (p *parser) claudeResults(msg obj) []Event {
	var out []Event
	for _, b := range blocks(msg["content"]) {
		if kind, _ := str(b["type"]); kind != "tool_result" {
			continue
		}
		id, _ := str(b["tool_use_id"])
		var isError bool
		_ = json.Unmarshal(b["is_error"], &isError)
		out = append(out, p.callResult(id, contentText(b["content"]), isError))
	}
	return out
}

// claudeResult maps the result event: its usage and cost, then the result.
func (p *parser) claudeResult(m obj) []Event {
	var out []Event
	if u, ok := m["usage"]; ok {
		out = append(out, p.usage(u, m["total_cost_usd"]))
	}
	subtype, _ := str(m["subtype"])
	var isError bool
	_ = json.Unmarshal(m["is_error"], &isError)
	status := "success"
	if subtype != "success" || isError {
		status = "failed"
	}
	text, ok := str(m["result"])
	if !ok {
		var errs []string
		_ = json.Unmarshal(m["errors"], &errs)
		text = strings.Join(errs, "; ")
	}
	return append(out, p.result(status, text))
}

// contentText is a tool result's content: a string, or the text of its
// blocks joined by newlines.
func contentText(raw json.RawMessage) string {
	if s, ok := str(raw); ok {
		return s
	}
	var parts []string
	for _, b := range blocks(raw) {
		if t, ok := str(b["text"]); ok {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

// rawText is a JSON value as text: a string's content, else its JSON.
func rawText(raw json.RawMessage) string {
	if s, ok := str(raw); ok {
		return s
	}
	return string(raw)
}

func blocks(raw json.RawMessage) []obj {
	var bs []obj
	_ = json.Unmarshal(raw, &bs)
	return bs
}

func str(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func object(raw json.RawMessage) obj {
	var m obj
	_ = json.Unmarshal(raw, &m)
	return m
}
