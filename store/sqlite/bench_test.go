package sqlite_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/sqlite"
)

// BenchmarkCommit measures committed events per second: each operation is
// one Update appending perCommit events of 256 bytes to one run, against
// the memory store (the baseline) and SQLite in both sync modes, in the
// same run. Run with:
//
//	go test -run '^$' -bench Commit -benchtime 2s ./store/sqlite/
func BenchmarkCommit(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 256)
	encode := func(uint64) ([]byte, error) { return payload, nil }
	stores := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"memory", func(*testing.B) store.Store { return store.NewMemory() }},
		{"sqlite-normal", func(b *testing.B) store.Store { return openBench(b, sqlite.SyncNormal) }},
		{"sqlite-full", func(b *testing.B) store.Store { return openBench(b, sqlite.SyncFull) }},
	}
	for _, perCommit := range []int{1, 16} {
		for _, st := range stores {
			b.Run(fmt.Sprintf("events=%d/%s", perCommit, st.name), func(b *testing.B) {
				s := st.open(b)
				defer s.Close()
				if err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateRun("t", store.Run{ID: "r"}) }); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					err := s.Update(ctx, func(tx store.Tx) error {
						for range perCommit {
							if _, err := tx.AppendEvent("t", "r", encode); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*perCommit)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

func openBench(b *testing.B, sync string) store.Store {
	s, err := sqlite.Open(ctx, sqlite.Options{Dir: b.TempDir(), Sync: sync})
	if err != nil {
		b.Fatal(err)
	}
	return s
}
