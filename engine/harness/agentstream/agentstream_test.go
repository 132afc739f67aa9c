package agentstream_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/harness/agentstream"
)

// recorded is a recorded stream of engine/harness/testdata.
func recorded(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixture is the events of a recorded stream.
func fixture(t *testing.T, name string) []agentstream.Fields {
	t.Helper()
	var out []agentstream.Fields
	for _, l := range strings.Split(strings.TrimSuffix(string(recorded(t, name)), "\n"), "\n") {
		m, _, err := agentstream.Decode([]byte(l))
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// A line that is not UTF-8 or not a JSON object is no event; an object
// without a string type is one of no type, its members kept.
func TestDecode(t *testing.T) {
	for line, want := range map[string]error{
		"{\"type\":\"\xff\"}": agentstream.ErrNotUTF8, "[]": agentstream.ErrNotObject, "null": agentstream.ErrNotObject,
		"not json": agentstream.ErrNotObject, `{"type":5,"text":"t"}`: agentstream.ErrNoType, `{"text":"t"}`: agentstream.ErrNoType,
	} {
		m, kind, err := agentstream.Decode([]byte(line))
		if !errors.Is(err, want) || kind != "" {
			t.Errorf("%q: %q, %v; want %v", line, kind, err, want)
		}
		if want == agentstream.ErrNoType && agentstream.Str(m["text"]) != "t" {
			t.Errorf("%q: members %v", line, m)
		}
	}
	if _, kind, err := agentstream.Decode([]byte(` {"type":"x"} `)); err != nil || kind != "x" {
		t.Fatalf("an event: %q, %v", kind, err)
	}
}

func TestCodexEvents(t *testing.T) {
	var evs []agentstream.CodexEvent
	for _, m := range fixture(t, "codex-success.jsonl") {
		evs = append(evs, agentstream.DecodeCodex(m, agentstream.Str(m["type"])))
	}
	if evs[0].ThreadID != "0199a213-81c0-7800-8aa1-bbab2a035a53" {
		t.Errorf("thread %q", evs[0].ThreadID)
	}
	cmd := evs[4].Item
	if cmd.Type != agentstream.CodexCommand || cmd.ID != "item_1" || cmd.Command != "bash -lc 'cat notes.txt'" || cmd.Status != "completed" ||
		cmd.Output != "draft\n" || string(cmd.ExitCode) != "0" || cmd.HasError {
		t.Errorf("command item %+v", cmd)
	}
	if ch := evs[5].Item.Changes(); len(ch) != 1 || ch[0] != (agentstream.CodexChange{Kind: "update", Path: "notes.txt"}) {
		t.Errorf("changes %+v", ch)
	}
	if todo := evs[6].Item.Todos(); len(todo) != 2 || !todo[0].Completed || todo[1].Text != "answer" {
		t.Errorf("todos %+v", todo)
	}
	if msg := evs[8].Item; msg.Type != agentstream.CodexAgentMessage || msg.Text != `{"text":"better"}` {
		t.Errorf("agent message %+v", msg)
	}
	if u, ok := evs[9].Tokens(); !ok || u != (agentstream.Usage{Input: 24763, CachedInput: 24448, Output: 122}) {
		t.Errorf("usage %+v, %v", u, ok)
	}
	m, kind, _ := agentstream.Decode([]byte(`{"type":"item.completed","item":{"type":"mcp_tool_call","error":{"message":""}}}`))
	if it := agentstream.DecodeCodex(m, kind).Item; !it.HasError || it.Error != "" {
		t.Errorf("an empty error message is an error: %+v", it)
	}
	m, kind, _ = agentstream.Decode([]byte(`{"type":"turn.failed","error":{"message":"boom"}}`))
	if ev := agentstream.DecodeCodex(m, kind); ev.Message != "boom" {
		t.Errorf("failure %+v", ev)
	}
}

func TestClaudeEvents(t *testing.T) {
	var evs []agentstream.ClaudeEvent
	for _, m := range fixture(t, "claude-success.jsonl") {
		id, present, err := agentstream.SessionID(m)
		if err != nil || !present || id != "8f0b7c5e-2f6a-4d3c-9a51-6f1f2f7f9e10" {
			t.Fatalf("session %q %v %v", id, present, err)
		}
		evs = append(evs, agentstream.DecodeClaude(m, agentstream.Str(m["type"])))
	}
	if evs[0].Subtype != agentstream.ClaudeInit || evs[0].Model != "claude-sonnet-5" {
		t.Errorf("init %+v", evs[0])
	}
	for i, want := range map[int]agentstream.ClaudeDelta{1: {}, 3: {Kind: agentstream.DeltaThinking, Text: "The notes "},
		5: {Kind: agentstream.DeltaStop}, 7: {Kind: agentstream.DeltaText, Text: "the notes.\nDone"}} {
		if evs[i].Delta != want {
			t.Errorf("event %d: delta %+v, want %+v", i, evs[i].Delta, want)
		}
	}
	if c := evs[10].Content; len(c) != 2 || c[0].Text != "I rewrote the notes.\nDone." || c[1].Name != "Edit" || c[1].ID != "toolu_1" ||
		string(c[1].Input) != `{"file_path":"notes.txt"}` {
		t.Errorf("content %+v", c)
	}
	if r := evs[11].ToolResults; len(r) != 1 || r[0].ID != "toolu_1" || r[0].IsError || r[0].Text() != "ok" {
		t.Errorf("tool results %+v", r)
	}
	res := evs[16].Result
	if res.Failed() || agentstream.Str(res.Answer) != `{"text":"better"}` {
		t.Errorf("result %+v", res)
	}
	m, kind, _ := agentstream.Decode([]byte(`{"type":"result","subtype":"error_max_turns","errors":["a","b"],"api_error_status":403,` +
		`"usage":{"input_tokens":3,"cache_read_input_tokens":2,"cache_creation_input_tokens":1,"output_tokens":4},"total_cost_usd":0.5}`))
	res = agentstream.DecodeClaude(m, kind).Result
	if u, ok := res.Tokens(); !ok || u != (agentstream.Usage{Input: 6, CachedInput: 2, Output: 4, CostUSD: 0.5}) {
		t.Errorf("usage %+v, %v", u, ok)
	}
	if !res.Failed() || res.ErrorText() != "a; b" || res.APIStatus != 403 {
		t.Errorf("failed result %+v", res)
	}
	m, kind, _ = agentstream.Decode([]byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t",` +
		`"content":[{"type":"text","text":"a"},{"text":"b"},{"image":1}],"is_error":true},{"type":"text","text":"x"}]}}`))
	if r := agentstream.DecodeClaude(m, kind).ToolResults; len(r) != 1 || !r[0].IsError || r[0].Text() != "a\nb" {
		t.Errorf("tool results %+v", r)
	}
	for line, want := range map[string]string{`{"session_id":5}`: "session_id is not a string", `{"session_id":" s "}`: "s", `{}`: ""} {
		m, _, _ := agentstream.Decode([]byte(line))
		id, _, err := agentstream.SessionID(m)
		if err != nil {
			id = err.Error()
		}
		if id != want {
			t.Errorf("%s: session %q, want %q", line, id, want)
		}
	}
}
