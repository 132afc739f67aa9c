package export

import (
	"encoding/json"
	"errors"

	"github.com/oecp/oecp/engine/harness/agentstream"
)

// parser reads one process's stdout lines: Codex's `exec --json` events,
// Claude's stream-json events (both decoded by agentstream), or the one
// {"session","text"} reply of a command harness. The two CLIs' event
// types do not overlap, so each line says which it is. A line that is not
// a JSON object is unreadable; an event of a type no mapping reads
// (progress, partial deltas, session notices) yields nothing. calls are
// the tool call ids already reported.
type parser struct {
	exec    string
	turn    int
	calls   map[string]bool
	lastMsg string
}

type obj = agentstream.Fields

// line maps one line to its events; ok is false for an unreadable line.
func (p *parser) line(line []byte) (evs []Event, ok bool) {
	m, kind, err := agentstream.Decode(line)
	if errors.Is(err, agentstream.ErrNoType) {
		if text, isReply := agentstream.StrOK(m["text"]); isReply {
			return []Event{p.text("text", text), p.result("success", text)}, true
		}
		return nil, false
	}
	if err != nil {
		return nil, false
	}
	switch kind {
	case agentstream.CodexItemStarted, agentstream.CodexItemUpdated, agentstream.CodexItemCompleted:
		return p.codexItem(kind, agentstream.DecodeCodex(m, kind).Item), true
	case agentstream.CodexTurnCompleted:
		var out []Event
		if u := agentstream.DecodeCodex(m, kind).Usage; u != nil {
			out = append(out, p.usage(u, nil))
		}
		return append(out, p.result("success", p.lastMsg)), true
	case agentstream.CodexTurnFailed:
		return []Event{p.result("failed", agentstream.DecodeCodex(m, kind).Message)}, true
	case agentstream.ClaudeAssistant:
		return p.claudeContent(agentstream.DecodeClaude(m, kind).Content), true
	case agentstream.ClaudeUser:
		return p.claudeResults(agentstream.DecodeClaude(m, kind).ToolResults), true
	case agentstream.ClaudeResult:
		return p.claudeResult(agentstream.DecodeClaude(m, kind).Result), true
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
func (p *parser) codexItem(event string, item agentstream.CodexItem) []Event {
	completed := event == agentstream.CodexItemCompleted
	switch item.Type {
	case agentstream.CodexAgentMessage:
		if !completed {
			return nil
		}
		p.lastMsg = item.Text
		return []Event{p.text("text", item.Text)}
	case agentstream.CodexReasoning:
		if !completed {
			return nil
		}
		return []Event{p.text("thinking", item.Text)}
	case "", agentstream.CodexTodoList, agentstream.CodexErrorItem:
		return nil
	}
	var out []Event
	if !p.calls[item.ID] {
		name, input := codexCall(item)
		out = append(out, p.call(item.ID, name, input))
	}
	if completed {
		output, isError := codexResult(item)
		out = append(out, p.callResult(item.ID, output, isError))
	}
	return out
}

// codexCall is a tool item's name and input.
func codexCall(item agentstream.CodexItem) (string, json.RawMessage) {
	pick := func(keys ...string) json.RawMessage {
		in := obj{}
		for _, k := range keys {
			if v, ok := item.Fields[k]; ok {
				in[k] = v
			}
		}
		b, _ := json.Marshal(in)
		return b
	}
	switch item.Type {
	case agentstream.CodexCommand:
		return item.Type, pick("command")
	case agentstream.CodexMCPToolCall:
		return item.Server + "/" + item.Tool, item.Fields["arguments"]
	case agentstream.CodexFileChange:
		return item.Type, pick("changes")
	case agentstream.CodexWebSearch:
		return item.Type, pick("query")
	}
	rest := obj{}
	for k, v := range item.Fields {
		if k != "id" && k != "type" && k != "status" {
			rest[k] = v
		}
	}
	b, _ := json.Marshal(rest)
	return item.Type, b
}

// codexResult is a completed tool item's output and whether it failed.
func codexResult(item agentstream.CodexItem) (string, bool) {
	failed := item.Status == "failed" || item.Status == "declined"
	if item.HasError {
		return item.Error, true
	}
	switch item.Type {
	case agentstream.CodexCommand:
		var code *int
		_ = json.Unmarshal(item.ExitCode, &code)
		return item.Output, failed || (code != nil && *code != 0)
	case agentstream.CodexMCPToolCall:
		return agentstream.Text(item.Fields["result"]), failed
	}
	return item.Status, failed
}

// claudeContent maps an assistant message's blocks: text, thinking and
// tool calls.
func (p *parser) claudeContent(content []agentstream.ClaudeBlock) []Event {
	var out []Event
	for _, b := range content {
		switch b.Type {
		case "text":
			out = append(out, p.text("text", b.Text))
		case "thinking":
			out = append(out, p.text("thinking", b.Text))
		case "tool_use", "server_tool_use":
			out = append(out, p.call(b.ID, b.Name, b.Input))
		}
	}
	return out
}

// claudeResults maps a user message's tool results.
func (p *parser) claudeResults(results []agentstream.ClaudeToolResult) []Event {
	var out []Event
	for _, r := range results {
		out = append(out, p.callResult(r.ID, r.Text(), r.IsError))
	}
	return out
}

// claudeResult maps the result event: its usage and cost, then the result.
func (p *parser) claudeResult(r agentstream.ClaudeOutcome) []Event {
	var out []Event
	if r.Usage != nil {
		out = append(out, p.usage(r.Usage, r.Cost))
	}
	status := "success"
	if r.Failed() {
		status = "failed"
	}
	text, ok := agentstream.StrOK(r.Answer)
	if !ok {
		text = r.ErrorText()
	}
	return append(out, p.result(status, text))
}
