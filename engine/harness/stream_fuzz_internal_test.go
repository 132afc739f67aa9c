package harness

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/protocol"
)

// sinkChecker fails the test on a published line that is not valid UTF-8,
// holds a control character or is over its bound.
func sinkChecker(t *testing.T) worker.Sinks {
	check := func(what, line string, bound int) {
		if !utf8.ValidString(line) || len(line) > bound || protocol.HasControl(line) {
			t.Fatalf("%s line of %d bytes: %.200q", what, len(line), line)
		}
	}
	return worker.Sinks{
		Log:    func(_, m string) { check("log", m, protocol.MaxLogMessageBytes) },
		Output: func(m string) { check("output", m, protocol.MaxAttachOutputBytes) },
	}
}

// streamLines splits stdout as the worker hands it to a driver: each line
// with its newline, and a last line without one.
func streamLines(stdout []byte) [][]byte {
	var out [][]byte
	for len(stdout) > 0 {
		i := bytes.IndexByte(stdout, '\n')
		if i < 0 {
			return append(out, stdout)
		}
		out, stdout = append(out, stdout[:i+1]), stdout[i+1:]
	}
	return out
}

func addStreamSeeds(f *testing.F, file string, extra ...string) {
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, false)
	f.Add(bytes.TrimSuffix(b, []byte("\n")), true)
	for _, s := range extra {
		f.Add([]byte(s), false)
	}
}

// FuzzCodexStream reads any bytes as Codex's `exec --json` stream: the
// lines it publishes are valid, and a turn it accepts has a session that
// is empty or valid and answers with the last agent message of the
// stream.
func FuzzCodexStream(f *testing.F) {
	addStreamSeeds(f, "codex-success.jsonl",
		`{"type":"thread.started","thread_id":"t"}`+"\n"+`{"type":"error","message":"unexpected status 401 Unauthorized"}`+"\n",
		`{"type":"thread.started","thread_id":"a"}`+"\n"+`{"type":"thread.started","thread_id":"b"}`+"\n",
		`{"type":"item.completed","item":{"type":"error","message":"Reconnecting... 1/5"}}`+"\n"+`{"type":"turn.failed","error":{}}`+"\n",
		`{"type":"item.completed","item":{"id":"1","type":"mcp_tool_call","server":"s","tool":"t","error":{"message":"x"},"status":"failed"}}`+"\n",
		`{"type":"item.completed","item":{"id":"1","type":"agent_message","text":"a\r\nb\u0000"}}`+"\n"+`{"type":"turn.completed","usage":{"input_tokens":1e400}}`+"\n",
	)
	f.Fuzz(func(t *testing.T, stdout []byte, exitFailed bool) {
		s := &codexStream{sinks: sinkChecker(t), stop: func() {}}
		for _, l := range streamLines(stdout) {
			s.line(l)
		}
		a := s.end(result(exitFailed))
		if !a.ok {
			if a.problem == "" {
				t.Fatal("a refused turn with no problem")
			}
			return
		}
		if a.problem != "" || exitFailed || len(s.messages) == 0 || a.reply.Text != s.messages[len(s.messages)-1] {
			t.Fatalf("accepted %+v after %d messages (exit failed: %v)", a, len(s.messages), exitFailed)
		}
		if a.reply.Session != "" && !validSession(a.reply.Session) {
			t.Fatalf("accepted session %q", a.reply.Session)
		}
	})
}

// FuzzClaudeStream reads any bytes as Claude Code's stream-json: the
// lines it publishes are valid, and a turn it accepts ended with a
// newline, has a valid session or none, and answers with the text of its
// successful result event.
func FuzzClaudeStream(f *testing.F) {
	addStreamSeeds(f, "claude-success.jsonl",
		`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":3,"error_status":401,"error":"x","session_id":"s"}`+"\n",
		`{"type":"result","subtype":"success","result":7,"session_id":"s"}`+"\n",
		`{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["a","b"],"api_error_status":403}`+"\n",
		`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"1","name":"mcp__s__t","input":{"a":"`+string(bytes.Repeat([]byte("é"), 150))+`"}}]},"session_id":" s "}`+"\n",
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"a\nb"}}}`+"\n\n",
	)
	f.Fuzz(func(t *testing.T, stdout []byte, exitFailed bool) {
		sinks := sinkChecker(t)
		s := &claudeStream{text: lineBuffer{sinks: sinks, st: streamOutput}, thinking: lineBuffer{sinks: sinks, st: streamSystem}, stop: func() {}}
		var lastResult json.RawMessage
		for _, l := range streamLines(stdout) {
			s.line(l)
			var m struct {
				Type   string
				Result json.RawMessage
			}
			if json.Unmarshal(l, &m) == nil && m.Type == "result" {
				lastResult = m.Result
			}
		}
		a := s.end(result(exitFailed))
		if !a.ok {
			if a.problem == "" {
				t.Fatal("a refused turn with no problem")
			}
			return
		}
		var want string
		if err := json.Unmarshal(lastResult, &want); err != nil || a.reply.Text != want {
			t.Fatalf("accepted %+v; the result event's result is %s", a, lastResult)
		}
		if a.problem != "" || exitFailed || !bytes.HasSuffix(stdout, []byte("\n")) {
			t.Fatalf("accepted %+v (exit failed: %v)", a, exitFailed)
		}
		if a.reply.Session != "" && !validSession(a.reply.Session) {
			t.Fatalf("accepted session %q", a.reply.Session)
		}
	})
}

// FuzzDecodeReply reads any bytes as a command harness's stdout: what it
// accepts is one {"session","text"} object with a valid session, and
// encoding the reply back gives the same reply.
func FuzzDecodeReply(f *testing.F) {
	for _, s := range []string{`{"session":"s-1","text":"hi"}`, `{"session":"","text":""}`, `{"session":"s","text":"a"} {}`,
		`{"session":"s","text":"a","x":1}`, `{"session":"s\u0007","text":"a"}`, `{"Session":"s","TEXT":"é\ud800"}` + "\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stdout []byte) {
		r, err := decodeReply("cmd", worker.ProcessResult{Stdout: stdout})
		if err != nil {
			return
		}
		if !validSession(r.Session) {
			t.Fatalf("accepted session %q", r.Session)
		}
		b, _ := json.Marshal(map[string]string{"session": r.Session, "text": r.Text})
		again, err := decodeReply("cmd", worker.ProcessResult{Stdout: b})
		if err != nil || again != r {
			t.Fatalf("round trip of %+v: %+v, %v", r, again, err)
		}
	})
}

func result(exitFailed bool) worker.ProcessResult {
	if exitFailed {
		return worker.ProcessResult{Exit: os.ErrProcessDone}
	}
	return worker.ProcessResult{}
}
