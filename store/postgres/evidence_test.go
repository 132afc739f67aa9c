package postgres_test

import (
	"errors"
	"testing"

	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
)

// TestAppendEvidenceOnOneConnection appends evidence through a pool of one
// connection: an append is one round trip from BEGIN to COMMIT, so the
// connection must come back out of its transaction after each, the
// refused append (an unknown run) included, for the next transaction to
// run and to see exactly what the appends wrote.
func TestAppendEvidenceOnOneConnection(t *testing.T) {
	pgtest.Require(t)
	s := open(t, postgres.Options{MaxConns: 1})
	if err := s.AppendEvidence(ctx, "t", "r", []store.EvidenceRecord{{Kind: "prompt"}}); !errors.Is(err, store.ErrNoRun) {
		t.Fatalf("append to an unknown run: %v, want ErrNoRun", err)
	}
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.CreateRun("t", store.Run{ID: "r"}) }))
	for i := range 3 {
		must(t, s.AppendEvidence(ctx, "t", "r", []store.EvidenceRecord{{Execution: "x", Turn: i, Kind: "stdout", Data: []byte{byte(i)}}}))
		must(t, s.View(ctx, func(tx store.ReadTx) error {
			_, _, err := tx.Run("t", "r")
			return err
		}))
	}
	last, err := s.LastEvidence(ctx, "t", "r")
	must(t, err)
	got, err := s.EvidenceAfter(ctx, "t", "r", 0, last, 10)
	must(t, err)
	if len(got) != 3 {
		t.Fatalf("read %d records, want 3 (the refused append wrote nothing)", len(got))
	}
	for i, r := range got {
		if r.Turn != i || len(r.Data) != 1 || r.Data[0] != byte(i) {
			t.Fatalf("record %d = %+v", i, r)
		}
	}
}
