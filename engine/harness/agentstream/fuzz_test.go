package agentstream_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/oecp/oecp/engine/harness/agentstream"
)

// addLines seeds a fuzz target with each line of a recorded stream and
// the extra lines.
func addLines(f *testing.F, file string, extra ...string) {
	for _, l := range append(bytes.Split(recorded(f, file), []byte("\n")), []byte("null"), []byte("{\"type\":\"\xff\"}"), []byte(`{"type":1}`)) {
		f.Add(l)
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
}

// decoded is the event of one line: it fails the test when the line is
// no event for another reason than Decode's.
func decoded(t *testing.T, line []byte) (agentstream.Fields, string, bool) {
	m, kind, err := agentstream.Decode(line)
	switch {
	case err == nil:
		if agentstream.Str(m["type"]) != kind {
			t.Fatalf("type %q of %q", kind, line)
		}
		return m, kind, true
	case errors.Is(err, agentstream.ErrNoType) && m == nil,
		!errors.Is(err, agentstream.ErrNoType) && !errors.Is(err, agentstream.ErrNotObject) && !errors.Is(err, agentstream.ErrNotUTF8):
		t.Fatalf("%q: %v with members %v", line, err, m)
	}
	return nil, "", false
}

// encode is v as one JSON line, HTML characters unescaped.
func encode(t *testing.T, v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encode %v: %v", v, err)
	}
	return b.Bytes()
}

// setRaw sets m[key] to raw JSON when there is one.
func setRaw(m map[string]any, key string, raw json.RawMessage) {
	if raw != nil {
		m[key] = compact(raw)
	}
}

// compact is raw JSON without insignificant space (nil stays nil).
func compact(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	_ = json.Compact(&b, raw)
	return b.Bytes()
}

// FuzzCodexEvent reads any line as a Codex event: what the decoder reads
// is exactly the members it names, so the event written back as the
// members it reads decodes to the same event.
func FuzzCodexEvent(f *testing.F) {
	addLines(f, "codex-success.jsonl",
		`{"type":"item.completed","item":{"id":"1","type":"mcp_tool_call","server":"s","tool":"t","error":{"message":""},"arguments":{"a":1}}}`,
		`{"type":"turn.completed","usage":{"input_tokens":1e400,"output_tokens":"7"}}`, `{"type":"turn.failed","error":{"message":5}}`,
		`{"type":"item.started","item":{"type":"command_execution","exit_code":[1],"aggregated_output":"<&>"}}`)
	f.Fuzz(func(t *testing.T, line []byte) {
		m, kind, ok := decoded(t, line)
		if !ok {
			return
		}
		ev := agentstream.DecodeCodex(m, kind)
		it := ev.Item
		item := map[string]any{"type": it.Type, "id": it.ID, "text": it.Text, "status": it.Status, "command": it.Command, "server": it.Server,
			"tool": it.Tool, "query": it.Query, "aggregated_output": it.Output, "message": it.Message}
		setRaw(item, "exit_code", it.ExitCode)
		if it.HasError {
			item["error"] = map[string]string{"message": it.Error}
		}
		back := map[string]any{"type": kind, "thread_id": ev.ThreadID, "item": item, "message": ev.Message,
			"error": map[string]string{"message": ev.Message}}
		setRaw(back, "usage", ev.Usage)
		bm, _, _ := decoded(t, encode(t, back))
		again := agentstream.DecodeCodex(bm, kind)
		u1, ok1 := ev.Tokens()
		u2, ok2 := again.Tokens()
		if u1 != u2 || ok1 != ok2 || (ev.Usage == nil) != (again.Usage == nil) {
			t.Fatalf("usage %+v %v, written back %+v %v", u1, ok1, u2, ok2)
		}
		ev.Item.Fields, again.Item.Fields, ev.Usage, again.Usage = nil, nil, nil, nil
		ev.Item.ExitCode, again.Item.ExitCode = compact(ev.Item.ExitCode), compact(again.Item.ExitCode)
		if !reflect.DeepEqual(ev, again) {
			t.Fatalf("%q decodes to\n%+v\nwritten back to\n%+v", line, ev, again)
		}
	})
}

// FuzzClaudeEvent reads any line as a Claude Code event: written back as
// the members the decoder reads, it decodes to the same event.
func FuzzClaudeEvent(f *testing.F) {
	addLines(f, "claude-success.jsonl",
		`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":3,"error_status":401,"error":"x","session_id":"s"}`,
		`{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["a",2],"api_error_status":403,"usage":{"input_tokens":1},"total_cost_usd":0.5}`,
		`{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"h"},{"type":"server_tool_use","id":"s","name":"w","input":{"q":1}},3]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a"},{"text":"b"}],"is_error":true}]}}`)
	f.Fuzz(func(t *testing.T, line []byte) {
		m, kind, ok := decoded(t, line)
		if !ok {
			return
		}
		ev := agentstream.DecodeClaude(m, kind)
		back := claudeBack(ev)
		bm, _, _ := decoded(t, encode(t, back))
		again := agentstream.DecodeClaude(bm, kind)
		if ev.Type == agentstream.ClaudeResult {
			u1, ok1 := ev.Result.Tokens()
			u2, ok2 := again.Result.Tokens()
			if u1 != u2 || ok1 != ok2 {
				t.Fatalf("usage %+v %v, written back %+v %v", u1, ok1, u2, ok2)
			}
		}
		for _, e := range []*agentstream.ClaudeEvent{&ev, &again} {
			r := &e.Result
			r.Answer, r.Usage, r.Cost = compact(r.Answer), compact(r.Usage), compact(r.Cost)
			for i := range e.Content {
				e.Content[i].Input = compact(e.Content[i].Input)
			}
			for i := range e.ToolResults {
				e.ToolResults[i].Content = compact(e.ToolResults[i].Content)
			}
		}
		if !reflect.DeepEqual(ev, again) {
			t.Fatalf("%q decodes to\n%+v\nwritten back to\n%+v", line, ev, again)
		}
	})
}

// claudeBack is a Claude event written back as the members the decoder
// reads.
func claudeBack(ev agentstream.ClaudeEvent) map[string]any {
	var delta map[string]any
	switch ev.Delta.Kind {
	case agentstream.DeltaStop:
		delta = map[string]any{"type": "content_block_stop"}
	case agentstream.DeltaText:
		delta = map[string]any{"type": "content_block_delta", "delta": map[string]any{"type": "text_delta", "text": ev.Delta.Text}}
	case agentstream.DeltaThinking:
		delta = map[string]any{"type": "content_block_delta", "delta": map[string]any{"type": "thinking_delta", "thinking": ev.Delta.Text}}
	}
	var content []any
	for _, b := range ev.Content {
		switch b.Type {
		case "text", "thinking":
			content = append(content, map[string]any{"type": b.Type, b.Type: b.Text})
		case "tool_use", "server_tool_use":
			block := map[string]any{"type": b.Type, "id": b.ID, "name": b.Name}
			setRaw(block, "input", b.Input)
			content = append(content, block)
		default:
			content = append(content, map[string]any{"type": b.Type})
		}
	}
	for _, r := range ev.ToolResults {
		block := map[string]any{"type": "tool_result", "tool_use_id": r.ID, "is_error": r.IsError}
		setRaw(block, "content", r.Content)
		content = append(content, block)
	}
	r, y := ev.Result, ev.Retry
	back := map[string]any{"type": ev.Type, "subtype": ev.Subtype, "model": ev.Model, "attempt": y.Attempt, "max_retries": y.MaxRetries,
		"error_status": y.Status, "error": y.Error, "event": delta, "message": map[string]any{"content": content},
		"is_error": r.IsError, "errors": r.Errors, "api_error_status": r.APIStatus}
	setRaw(back, "result", r.Answer)
	setRaw(back, "usage", r.Usage)
	setRaw(back, "total_cost_usd", r.Cost)
	return back
}
