package storetest

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/oecp/oecp/store"
)

// testEvidence checks the evidence port: order, tenant scope, the unknown
// run refusal, that appends wake no watcher, and deletion with the run.
func testEvidence(t *testing.T, s store.Store) {
	ev := store.Evidence(s)
	if err := ev.AppendEvidence(ctx, "a", "r1", []store.EvidenceRecord{{Kind: "prompt"}}); !errors.Is(err, store.ErrNoRun) {
		t.Fatalf("append to an unknown run: %v, want ErrNoRun", err)
	}
	createRun(t, s, "a", "r1")
	createRun(t, s, "b", "r1")
	ch := s.Changed()
	recs := []store.EvidenceRecord{
		{Execution: "e1", Turn: 0, Kind: "prompt", Attr: "stdin", Data: []byte("hello\x00\xff")},
		{Execution: "e1", Turn: 0, Kind: "stdout", Data: []byte("{}\n")},
		{Execution: "e1", Turn: 0, Kind: "end"},
	}
	must(t, ev.AppendEvidence(ctx, "a", "r1", recs[:2]))
	must(t, ev.AppendEvidence(ctx, "a", "r1", recs[2:]))
	must(t, ev.AppendEvidence(ctx, "b", "r1", []store.EvidenceRecord{{Execution: "x", Kind: "stderr", Data: []byte("other")}}))
	select {
	case <-ch:
		t.Fatal("an evidence append woke watchers")
	default:
	}
	last, err := ev.LastEvidence(ctx, "a", "r1")
	must(t, err)
	got, err := ev.EvidenceAfter(ctx, "a", "r1", 0, last, 10)
	must(t, err)
	if len(got) != 3 {
		t.Fatalf("read %d records, want 3", len(got))
	}
	for i, r := range got {
		w := recs[i]
		if r.Execution != w.Execution || r.Turn != w.Turn || r.Kind != w.Kind || r.Attr != w.Attr || !bytes.Equal(r.Data, w.Data) {
			t.Fatalf("record %d = %+v, want %+v", i, r, w)
		}
		if i > 0 && r.ID <= got[i-1].ID {
			t.Fatalf("IDs not increasing: %d after %d", r.ID, got[i-1].ID)
		}
	}
	page, err := ev.EvidenceAfter(ctx, "a", "r1", got[0].ID, got[1].ID, 10)
	must(t, err)
	if len(page) != 1 || page[0].ID != got[1].ID {
		t.Fatalf("page (after, through] = %+v, want the second record only", page)
	}
	must(t, s.Update(ctx, func(p store.Tx) error { return p.DeleteRun("a", "r1") }))
	if got, _ := ev.EvidenceAfter(ctx, "a", "r1", 0, math.MaxInt64, 10); len(got) != 0 {
		t.Fatalf("evidence of a deleted run still read: %+v", got)
	}
	if other, _ := ev.EvidenceAfter(ctx, "b", "r1", 0, math.MaxInt64, 10); len(other) != 1 || string(other[0].Data) != "other" {
		t.Fatalf("another tenant's evidence = %+v, want its one record", other)
	}
}
