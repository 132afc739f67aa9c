package export_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/oecp/oecp/runs/export"
)

func out(kind, offset, data string) export.Item {
	return export.Item{Execution: "r/n/1", Turn: 0, Kind: kind, Attr: offset, Data: []byte(data)}
}

// A line split across chunks is parsed whole; a line that is not a JSON
// object, and the last line when the process's end never came, are read
// as they are: the bad one counted, never guessed at.
func TestSemanticCountsUnreadableLines(t *testing.T) {
	var b bytes.Buffer
	s := export.NewSemantic(&b, "r")
	s.Evidence(out(export.KindStdout, "0", `{"type":"item.completed","item":{"id":"a","type":"agent_`))
	s.Evidence(out(export.KindStdout, "56", "message\",\"text\":\"hi\"}}\nnot json\n\n{\"session\":\"s\""))
	if err := s.Close(true, nil); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		`{"record":"header","runId":"r","format":"semantic","version":1}` + "\n",
		`{"type":"text","execution":"r/n/1","turn":0,"text":"hi"}` + "\n",
		`"unparsed":2}` + "\n",
		`{"reason":"unfinished","execution":"r/n/1","turn":0}`,
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("semantic view lacks %s:\n%s", want, got)
		}
	}
}

// Text is bounded on a UTF-8 boundary and marked truncated.
func TestSemanticBoundsText(t *testing.T) {
	var b bytes.Buffer
	s := export.NewSemantic(&b, "r")
	long := strings.Repeat("é", export.MaxText)
	s.Evidence(out(export.KindStdout, "0", `{"session":"s","text":"`+long+`"}`+"\n"))
	_ = s.Close(true, nil)
	first := strings.Split(b.String(), "\n")[1]
	if !strings.HasSuffix(first, `"truncated":true}`) || len(first) > export.MaxText+200 || strings.Contains(first, "\\ufffd") {
		t.Fatalf("bounded text line of %d bytes: %.80s…%s", len(first), first, first[len(first)-40:])
	}
}

// The footer names lost bytes (an offset that skips), streams cut at the
// bound, agent executions without evidence and a run still going.
func TestTraceFooterMissing(t *testing.T) {
	var b bytes.Buffer
	tr := export.NewTrace(&b, "r")
	tr.Evidence(export.Item{Execution: "r/n/1", Kind: export.KindPrompt, Attr: "stdin", Data: []byte("p")})
	tr.Evidence(out(export.KindStdout, "0", "ab"))
	tr.Evidence(out(export.KindStdout, "5", "cd"))
	tr.Evidence(export.Item{Execution: "r/n/1", Kind: export.KindEnd, Data: []byte(`{"stdout":7,"stderr":0,"stderrTruncated":true}`)})
	if err := tr.Close(false, []string{"r/n/1", "r/m/1"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := `{"record":"footer","complete":false,"missing":[{"reason":"run_active"},{"reason":"no_evidence","execution":"r/m/1"},` +
		`{"reason":"gap","execution":"r/n/1","turn":0,"stream":"stdout"},{"reason":"truncated","execution":"r/n/1","turn":0,"stream":"stderr"}]}`
	if lines[len(lines)-1] != want {
		t.Fatalf("footer\n%s\nwant\n%s", lines[len(lines)-1], want)
	}
}

// A Tail says an export ended only when its last line is a footer with
// its newline, however the bytes were cut.
func TestTailEnded(t *testing.T) {
	footer := `{"record":"footer","complete":true,"missing":[]}` + "\n"
	for stream, want := range map[string]bool{
		`{"record":"header"}` + "\n" + footer: true, footer: true,
		`{"record":"header"}` + "\n" + strings.TrimSuffix(footer, "\n"): false,
		footer + `{"record":"head`:                                      false,
		`{"record":"header"}` + "\n":                                    false,
		"":                                                              false,
		footer + `{"type":"text","text":"` + strings.Repeat("x", 1<<16) + `"}` + "\n": false,
	} {
		for _, size := range []int{1, 7, len(stream) + 1} {
			tail := export.NewTail()
			for b := []byte(stream); len(b) > 0; b = b[min(size, len(b)):] {
				_, _ = tail.Write(b[:min(size, len(b))])
			}
			if tail.Ended() != want {
				t.Errorf("%.60q in chunks of %d: ended %v, want %v", stream, size, !want, want)
			}
		}
	}
}

// A line over MaxLine is unparsed, whichever chunks it came in, and the
// next line is read.
func TestSemanticLineOverMaxLine(t *testing.T) {
	long := []byte(`{"text":"` + strings.Repeat("x", export.MaxLine) + `"}` + "\n")
	next := []byte(`{"text":"after"}` + "\n")
	whole := semanticOf(t, append(append([]byte(nil), long...), next...))
	if split := semanticOf(t, long[:export.MaxLine/2], long[export.MaxLine/2:], next); !bytes.Equal(whole, split) {
		t.Fatal("the view depends on the chunking")
	}
	for _, want := range []string{`"text":"after"`, `"unparsed":1}`} {
		if !strings.Contains(string(whole), want) {
			t.Fatalf("the view lacks %s:\n%.300s", want, whole)
		}
	}
}
