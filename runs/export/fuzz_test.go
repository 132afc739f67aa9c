package export_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/oecp/oecp/runs/export"
)

// semanticOf is the semantic view of one finished process whose stdout
// came in the given chunks, at their true offsets.
func semanticOf(t *testing.T, chunks ...[]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	s := export.NewSemantic(&b, "r")
	var off int
	for _, c := range chunks {
		s.Evidence(out(export.KindStdout, strconv.Itoa(off), string(c)))
		off += len(c)
	}
	end, _ := json.Marshal(export.End{Stdout: int64(off)})
	s.Evidence(export.Item{Execution: "r/n/1", Kind: export.KindEnd, Data: end})
	if err := s.Close(true, []string{"r/n/1"}); err != nil {
		t.Fatalf("close: %v", err)
	}
	return b.Bytes()
}

// FuzzSemantic feeds any bytes to the semantic view as an agent's stdout.
// Whatever the agent wrote, the view is one JSON object a line (header,
// events, footer), every event's text is valid UTF-8 within MaxText and
// every input within MaxInput, the footer finds nothing missing, and the
// view does not depend on how the stream was cut into chunks.
func FuzzSemantic(f *testing.F) {
	for _, name := range []string{"codex-success.jsonl", "claude-success.jsonl"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "engine", "harness", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint16(len(b)/2))
	}
	for _, s := range []string{
		`{"type":"item.completed","item":{"id":"a","type":"agent_message","text":"hi"}}` + "\nnot json\n\n{\"session\":\"s\"",
		`{"session":"s","text":"answer"}`,
		`{"type":"item.started","item":{"id":"c","type":"mcp_tool_call","server":"s","tool":"t","arguments":{"a":1}}}` + "\n" +
			`{"type":"item.completed","item":{"id":"c","type":"mcp_tool_call","server":"s","tool":"t","result":{"x":[1]},"status":"failed"}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a"},{"text":"b"}],"is_error":true}]}}`,
		`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["x","y"],"usage":{"input_tokens":1},"total_cost_usd":0.5}`,
		`{"type":"turn.failed","error":{"message":"boom"}}` + "\r\n" + `{"type":"turn.completed","usage":{}}`,
		`{"type":"item.completed","item":{"id":"x","type":"command_execution","exit_code":"7","error":{"message":1}}}`,
		"{\"text\":\"\xff\"}\n[]\nnull\n{}",
	} {
		f.Add([]byte(s), uint16(len(s)/3))
	}
	f.Fuzz(func(t *testing.T, stream []byte, cut uint16) {
		whole := semanticOf(t, stream)
		at := int(cut) % (len(stream) + 1)
		if split := semanticOf(t, stream[:at], stream[at:]); !bytes.Equal(whole, split) {
			t.Fatalf("the view depends on the chunking at %d:\n%s\nvs\n%s", at, whole, split)
		}
		lines := strings.Split(strings.TrimSuffix(string(whole), "\n"), "\n")
		if len(lines) < 2 {
			t.Fatalf("no header and footer: %q", whole)
		}
		for i, l := range lines {
			checkSemanticLine(t, l, i == len(lines)-1)
		}
	})
}

func checkSemanticLine(t *testing.T, line string, last bool) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil || m == nil {
		t.Fatalf("a line of the view is not a JSON object (%v): %q", err, line)
	}
	if last {
		var ft export.Footer
		if err := json.Unmarshal([]byte(line), &ft); err != nil || ft.Record != "footer" || !ft.Complete || ft.Unparsed == nil {
			t.Fatalf("footer %q (%v)", line, err)
		}
		return
	}
	if _, ok := m["record"]; ok {
		return // the header
	}
	var e export.Event
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatalf("event %q: %v", line, err)
	}
	for _, s := range []*string{e.Text, e.Output} {
		if s != nil && (len(*s) > export.MaxText || !utf8.ValidString(*s)) {
			t.Fatalf("a text of %d bytes (valid UTF-8: %v) in %.200q", len(*s), utf8.ValidString(*s), line)
		}
	}
	if len(e.Input) > export.MaxInput || len(e.Usage) > export.MaxInput {
		t.Fatalf("an input or usage over MaxInput in %.200q", line)
	}
	if e.Execution != "r/n/1" || e.Turn != 0 || e.Type == "" {
		t.Fatalf("event of another process or no type: %.200q", line)
	}
}

// FuzzTrace feeds any evidence to the trace writer: every line is a JSON
// object, and the bytes of each output chunk are given back exactly
// (as text, or base64 when they are not UTF-8).
func FuzzTrace(f *testing.F) {
	f.Add([]byte("p"), []byte("ab"), "0", []byte(`{"stdout":2,"stderr":0}`))
	f.Add([]byte{0xff, 0}, []byte("\xc3"), "-1", []byte(`{"stdout":"x"}`))
	f.Add([]byte("<&>"), []byte("é\n"), "99999999999999999999", []byte(`null`))
	f.Fuzz(func(t *testing.T, prompt, chunk []byte, offset string, end []byte) {
		var b bytes.Buffer
		tr := export.NewTrace(&b, "r")
		tr.Evidence(export.Item{Execution: "r/n/1", Kind: export.KindPrompt, Attr: "stdin", Data: prompt})
		tr.Evidence(out(export.KindStdout, offset, string(chunk)))
		tr.Evidence(out(export.KindStderr, offset, string(chunk)))
		tr.Evidence(export.Item{Execution: "r/n/1", Kind: export.KindEnd, Data: end})
		if err := tr.Close(true, []string{"r/n/1"}); err != nil {
			t.Fatalf("close: %v", err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if len(lines) != 6 {
			t.Fatalf("%d lines, want header, prompt, two outputs, end, footer:\n%s", len(lines), b.String())
		}
		for i, l := range lines {
			var m struct {
				Record, Data, Encoding string
			}
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("line %d is not a JSON object (%v): %q", i, err, l)
			}
			want := chunk
			if i == 1 {
				want = prompt
			}
			if (i == 1 || i == 2 || i == 3) && !bytes.Equal(decoded(t, m.Data, m.Encoding), want) {
				t.Fatalf("line %d does not give back its bytes: %q", i, l)
			}
		}
	})
}

func decoded(t *testing.T, data, encoding string) []byte {
	t.Helper()
	switch encoding {
	case "":
		return []byte(data)
	case "base64":
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			t.Fatalf("base64 data: %v", err)
		}
		return b
	}
	t.Fatalf("encoding %q", encoding)
	return nil
}
