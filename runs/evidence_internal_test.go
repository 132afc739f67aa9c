package runs

import (
	"strings"
	"testing"
)

// A declared value is redacted wherever the reads of a stream cut it,
// longest value first, and a tail that only looked like the start of one
// is kept as it was.
func TestRedactorAcrossPieces(t *testing.T) {
	text := "a sk-secret-long b sk-sec c sk-se"
	r := newRedactor([][]byte{[]byte("sk-sec"), []byte("sk-secret-long")})
	for cut := range len(text) + 1 {
		var out []byte
		var held []byte
		for _, piece := range []string{text[:cut], text[cut:]} {
			o, h := r.redact(append(held, piece...), false)
			out, held = append(out, o...), h
		}
		o, _ := r.redact(held, true)
		out = append(out, o...)
		if got, want := string(out), "a [REDACTED] b [REDACTED] c sk-se"; got != want {
			t.Fatalf("cut at %d: %q, want %q", cut, got, want)
		}
	}
	if out, held := (redactor{}).redact([]byte("plain"), false); string(out) != "plain" || held != nil {
		t.Fatalf("no values: %q %q", out, held)
	}
}

// Consecutive pieces of one stream merge up to the chunk bound; a gap in
// offsets or another stream starts a new record.
func TestMergeEvidence(t *testing.T) {
	k := execKey{runKey{"t", "r"}, "e"}
	piece := func(kind, off, data string) pendingEvidence {
		return pendingEvidence{key: k, rec: evRecord("e", 0, kind, off, []byte(data))}
	}
	big := strings.Repeat("x", evidenceChunk)
	got := mergeEvidence([]pendingEvidence{
		piece(evStdout, "0", "ab"), piece(evStdout, "2", "cd"), piece(evStderr, "0", "E"),
		piece(evStdout, "4", "ef"), piece(evStdout, "9", "gap"), piece(evStdout, "12", big),
	})
	var kinds []string
	for _, r := range got {
		kinds = append(kinds, r.Kind+":"+r.Attr+":"+string(r.Data[:min(len(r.Data), 4)]))
	}
	want := "stdout:0:abcd stderr:0:E stdout:4:ef stdout:9:gap stdout:12:xxxx"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("merged %v, want %s", kinds, want)
	}
}
