package runs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/store"
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

// Every spelling of a declared value (its hex and base64, and the stable
// core of it inside larger base64 data) is redacted from the evidence
// wherever the reads of a stream cut it in two: the tail held back reaches
// the longest spelling.
func TestRedactorCatchesASpellingCutAcrossPieces(t *testing.T) {
	key := "sk-??>~~~-0123456789-cut"
	t.Setenv("OECP_TEST_KEY", key)
	sub := &Submission{Runtime: RuntimePlan{Nodes: map[string]Binding{"a": {Kind: KindAgent, Env: []string{"OECP_TEST_KEY"}}}}}
	r := newRedactor(newRecordRedactor(sub).byteValues())
	b := []byte(key)
	const prefix = "PPPPPPP" // the key at offset 1 mod 3 of the blob's data
	blob := base64.StdEncoding.EncodeToString([]byte(prefix + key + "zz, the rest"))
	first, end := (8*len(prefix)+5)/6, 8*(len(prefix)+len(key))/6
	for name, c := range map[string]struct{ in, want string }{
		"hex":                {hex.EncodeToString(b), redactedEvidence},
		"HEX":                {strings.ToUpper(hex.EncodeToString(b)), redactedEvidence},
		"base64":             {base64.StdEncoding.EncodeToString(b), redactedEvidence},
		"base64url unpadded": {base64.RawURLEncoding.EncodeToString(b), redactedEvidence},
		"blob":               {blob, blob[:first] + redactedEvidence + blob[end:]},
	} {
		text := "a " + c.in + " b"
		for cut := range len(text) + 1 {
			if got, want := redactInTwo(r, text, cut), "a "+c.want+" b"; got != want {
				t.Fatalf("%s cut at %d: %q, want %q", name, cut, got, want)
			}
		}
	}
}

// redactInTwo redacts text arriving as two pieces cut at cut.
func redactInTwo(r redactor, text string, cut int) string {
	var out, held []byte
	for _, piece := range []string{text[:cut], text[cut:]} {
		o, h := r.redact(append(held, piece...), false)
		out, held = append(out, o...), h
	}
	o, _ := r.redact(held, true)
	return string(append(out, o...))
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

// blockedEvidence is a store whose evidence writes wait for release.
type blockedEvidence struct {
	store.Store
	release chan struct{}
	mu      sync.Mutex
	got     []store.EvidenceRecord
}

func (b *blockedEvidence) AppendEvidence(_ context.Context, _, _ string, recs []store.EvidenceRecord) error {
	<-b.release
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, recs...)
	return nil
}

func (b *blockedEvidence) EvidenceAfter(context.Context, string, string, uint64, uint64, int) ([]store.EvidenceRecord, error) {
	return nil, nil
}

func (b *blockedEvidence) LastEvidence(context.Context, string, string) (uint64, error) {
	return 0, nil
}

// A process's tap never waits for the store: with every evidence write
// stuck, a process reports its prompt, 1 MiB of output and its end; once
// the store answers, all of it is written, in order, and the ended
// execution's wait returns.
func TestEvidenceTapNeverWaitsForTheStore(t *testing.T) {
	st := &blockedEvidence{Store: store.NewMemory(), release: make(chan struct{})}
	b := New(Config{Store: st})
	tap := b.evidenceTap("tk", "run", "run/n/1", nil)
	raw, end := tap.Started([]string{"cli", "the prompt"}, nil)
	chunk := []byte(strings.Repeat("y", 4096))
	for range 256 {
		raw(evStdout, chunk)
	}
	end()
	close(st.release)
	b.evidence.waitSaved(execKey{runKey{"tk", "run"}, "run/n/1"}, time.Minute)
	st.mu.Lock()
	defer st.mu.Unlock()
	var out int
	for _, r := range st.got {
		if r.Kind == evStdout {
			out += len(r.Data)
		}
	}
	if first, last := st.got[0], st.got[len(st.got)-1]; first.Kind != evPrompt || string(first.Data) != "the prompt" || first.Attr != "argv" || last.Kind != evEnd || out != 256*4096 {
		t.Fatalf("written: first %+v, last %+v, %d output bytes", first, last, out)
	}
	b.Close()
}

// BenchmarkRedactorSpellings measures the evidence redactor over agent
// output with a declared key's every spelling against the key alone (the
// baseline): the first-byte index keeps the spellings from multiplying
// the per-byte cost.
func BenchmarkRedactorSpellings(b *testing.B) {
	key := "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
	b.Setenv("OECP_TEST_KEY", key)
	sub := &Submission{Runtime: RuntimePlan{Nodes: map[string]Binding{"a": {Kind: KindAgent, Env: []string{"OECP_TEST_KEY"}}}}}
	// Ordinary output, with the start of the key's base64 ("c2stcHJv")
	// that a redactor must look past.
	buf := bytes.Repeat([]byte(`{"type":"item.completed","item":{"text":"some ordinary output with words and c2stcHJv 0123"}}`+"\n"), 1<<14)
	for name, values := range map[string][][]byte{"key alone": {[]byte(key)}, "every spelling": newRecordRedactor(sub).byteValues()} {
		r := newRedactor(values)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				r.redact(buf, true)
			}
		})
	}
}
