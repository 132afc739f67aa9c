package evidence

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/redact"
	"github.com/oecp/oecp/store"
)

// A declared value is redacted wherever the reads of a stream cut it,
// longest value first, and a tail that only looked like the start of one
// is kept as it was.
func TestRedactorAcrossPieces(t *testing.T) {
	text := "a sk-secret-long b sk-sec c sk-se"
	r := newRedactor([][]byte{[]byte("sk-sec"), []byte("sk-secret-long")})
	for cut := range len(text) + 1 {
		if got, want := redactInTwo(r, text, cut), "a [REDACTED] b [REDACTED] c sk-se"; got != want {
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
	r := newRedactor(spellings(key))
	b := []byte(key)
	const prefix = "PPPPPPP" // the key at offset 1 mod 3 of the blob's data
	blob := base64.StdEncoding.EncodeToString([]byte(prefix + key + "zz, the rest"))
	first, end := (8*len(prefix)+5)/6, 8*(len(prefix)+len(key))/6
	for name, c := range map[string]struct{ in, want string }{
		"hex":                {hex.EncodeToString(b), redact.Marker},
		"HEX":                {strings.ToUpper(hex.EncodeToString(b)), redact.Marker},
		"base64":             {base64.StdEncoding.EncodeToString(b), redact.Marker},
		"base64url unpadded": {base64.RawURLEncoding.EncodeToString(b), redact.Marker},
		"blob":               {blob, blob[:first] + redact.Marker + blob[end:]},
	} {
		text := "a " + c.in + " b"
		for cut := range len(text) + 1 {
			if got, want := redactInTwo(r, text, cut), "a "+c.want+" b"; got != want {
				t.Fatalf("%s cut at %d: %q, want %q", name, cut, got, want)
			}
		}
	}
}

// spellings are the spellings of the declared values, as package runs
// hands them to a tap.
func spellings(values ...string) [][]byte {
	var out [][]byte
	for _, v := range redact.New(values).Spellings() {
		out = append(out, []byte(v))
	}
	return out
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
func TestMerge(t *testing.T) {
	k := execKey{runKey{"t", "r"}, "e"}
	piece := func(kind, off, data string) pendingEvidence {
		return pendingEvidence{key: k, rec: evRecord("e", 0, kind, off, []byte(data))}
	}
	big := strings.Repeat("x", chunk)
	got := merge([]pendingEvidence{
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
	r := NewRecorder(st, slog.New(slog.DiscardHandler))
	tap := r.Tap("tk", "run", "run/n/1", nil)
	raw, end := tap.Started([]string{"cli", "the prompt"}, nil)
	chunk := []byte(strings.Repeat("y", 4096))
	for range 256 {
		raw(evStdout, chunk)
	}
	end()
	close(st.release)
	r.waitSaved(execKey{runKey{"tk", "run"}, "run/n/1"}, time.Minute)
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
	r.Close()
}

// BenchmarkRedactorSpellings measures the evidence redactor over agent
// output with a declared key's every spelling against the key alone (the
// baseline): the first-byte index keeps the spellings from multiplying
// the per-byte cost.
func BenchmarkRedactorSpellings(b *testing.B) {
	key := "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
	// Ordinary output, with the start of the key's base64 ("c2stcHJv")
	// that a redactor must look past.
	buf := bytes.Repeat([]byte(`{"type":"item.completed","item":{"text":"some ordinary output with words and c2stcHJv 0123"}}`+"\n"), 1<<14)
	for name, values := range map[string][][]byte{"key alone": {[]byte(key)}, "every spelling": spellings(key)} {
		r := newRedactor(values)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				r.redact(buf, true)
			}
		})
	}
}

// countingEvidence is a store that counts the evidence records written.
type countingEvidence struct {
	blockedEvidence
	written atomic.Int64
}

func (c *countingEvidence) AppendEvidence(_ context.Context, _, _ string, recs []store.EvidenceRecord) error {
	c.written.Add(int64(len(recs)))
	return nil
}

// Records reported while the backend closes are each either written
// before Close returns or refused and counted, and a record reported
// after Close is refused: none is left pending, and no flusher starts
// after Close waited.
func TestEvidenceRecordedConcurrentlyWithClose(t *testing.T) {
	st := &countingEvidence{blockedEvidence: blockedEvidence{Store: store.NewMemory()}}
	r := NewRecorder(st, slog.New(slog.DiscardHandler))
	const writers = 8
	var accepted atomic.Int64
	var started, all sync.WaitGroup
	started.Add(writers)
	all.Add(writers)
	for w := range writers {
		go func() {
			defer all.Done()
			key := execKey{runKey{"tk", "run"}, "run/n/" + strconv.Itoa(w)}
			// Each writer reports until its first record is refused.
			for i := 0; ; i++ {
				if i == 100 {
					started.Done()
				}
				// Distinct turns, so that no two records merge.
				if !r.add(key, evRecord(key.execution, i, evPrompt, "stdin", []byte("p"))) {
					if i < 100 {
						started.Done()
					}
					return
				}
				accepted.Add(1)
			}
		}()
	}
	testkit.Wait(t, &started)
	r.Close()
	writtenAtClose := st.written.Load()
	testkit.Wait(t, &all)
	late := execKey{runKey{"tk", "run"}, "run/n/late"}
	if r.add(late, evRecord(late.execution, 0, evPrompt, "stdin", []byte("p"))) {
		t.Error("a record reported after Close returned was accepted")
	}
	r.mu.Lock()
	pending, flushing := len(r.pending), r.flushing
	r.mu.Unlock()
	if pending != 0 || flushing {
		t.Fatalf("after Close: %d records pending, flusher running %v", pending, flushing)
	}
	if got := accepted.Load(); writtenAtClose != got {
		t.Fatalf("%d records written by Close, %d accepted", writtenAtClose, got)
	}
	if got, want := r.droppedRecords(), int64(writers+1); got != want {
		t.Fatalf("%d records counted as dropped, want %d (one per writer and the late one)", got, want)
	}
}

// With the store stuck, evidence past the pending bounds (bytes, or
// records however small) is dropped, counted and logged, not queued: what
// is held stays within the bounds, and once the store answers exactly the
// accepted records are written.
func TestEvidencePendingIsBounded(t *testing.T) {
	for name, c := range map[string]struct {
		size, count int
	}{
		"bytes":   {1 << 20, maxPending>>20 + 8},
		"records": {1, maxPendingRecords + 8},
	} {
		t.Run(name, func(t *testing.T) {
			st := &blockedEvidence{Store: store.NewMemory(), release: make(chan struct{})}
			logs := testkit.NewSyncBuffer()
			r := NewRecorder(st, slog.New(slog.NewTextHandler(logs, nil)))
			key := execKey{runKey{"tk", "run"}, "run/n/1"}
			piece := bytes.Repeat([]byte("z"), c.size)
			accepted := 0
			for i := range c.count {
				// Offsets with a gap, so that no two pieces merge.
				if r.add(key, evRecord(key.execution, 0, evStdout, itoa(int64(i*(c.size+1))), piece)) {
					accepted++
				}
			}
			r.mu.Lock()
			held, records := r.held, r.records
			r.mu.Unlock()
			if held > maxPending || records > maxPendingRecords {
				t.Fatalf("%d bytes in %d records held, over the bounds", held, records)
			}
			if got := r.droppedRecords(); got != int64(c.count-accepted) || got == 0 {
				t.Fatalf("%d counted as dropped, %d of %d accepted", got, accepted, c.count)
			}
			close(st.release)
			r.Close()
			st.mu.Lock()
			written := len(st.got)
			st.mu.Unlock()
			if written != accepted {
				t.Fatalf("%d records written, %d accepted", written, accepted)
			}
			if !strings.Contains(logs.String(), "agent evidence dropped") || !strings.Contains(logs.String(), "pending bound") {
				t.Fatalf("no log of the dropped evidence: %s", logs.String())
			}
		})
	}
}
