package postgres_test

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
	"github.com/oecp/oecp/store/sqlite"
)

// benchStores opens the stores compared in one run: PostgreSQL and SQLite
// (sync full: both fsync every commit).
var benchStores = []struct {
	name string
	open func(b *testing.B) store.Store
}{
	{"postgres", func(b *testing.B) store.Store { return open(b, postgres.Options{MaxConns: 16}) }},
	{"sqlite-full", func(b *testing.B) store.Store {
		s, err := sqlite.Open(ctx, sqlite.Options{Dir: b.TempDir(), Sync: sqlite.SyncFull})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

// BenchmarkCommitShape measures commits/s of the cluster's write shape:
// read a tenant's cluster record, write it back one version up, append one
// 256-byte event to its run; 16 writers, one tenant each. Run with:
//
//	go test -run '^$' -bench CommitShape -benchtime 5s ./store/postgres/
//
// pgbench of the same transaction shape: see testdata/commit-shape.sql.
func BenchmarkCommitShape(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 256)
	encode := func(uint64) ([]byte, error) { return payload, nil }
	const writers = 16
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			pgtest.Require(b)
			s := st.open(b)
			must(b, s.Update(ctx, func(tx store.Tx) error {
				for i := range writers {
					if err := tx.CreateRun(fmt.Sprint("t", i), store.Run{ID: "r"}); err != nil {
						return err
					}
				}
				return nil
			}))
			var next atomic.Int64
			b.SetParallelism((writers + 1) / 2)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				tenant := fmt.Sprint("t", next.Add(1)-1)
				for pb.Next() {
					err := s.Update(ctx, func(tx store.Tx) error {
						c, _, err := tx.Cluster(tenant)
						if err != nil {
							return err
						}
						if err := tx.PutCluster(tenant, store.Cluster{Version: c.Version + 1, Data: payload}); err != nil {
							return err
						}
						_, err = tx.AppendEvent(tenant, "r", encode)
						return err
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// BenchmarkWatchFanout measures events/s delivered to N watchers of one
// run, each reading "after its cursor" when woken; one writer commits one
// event at a time. On PostgreSQL the watchers use a second store on the
// same schema (another replica), woken by NOTIFY.
func BenchmarkWatchFanout(b *testing.B) {
	for _, n := range []int{1, 100} {
		for _, st := range benchStores {
			b.Run(fmt.Sprintf("watchers=%d/%s", n, st.name), func(b *testing.B) {
				pgtest.Require(b)
				w := st.open(b)
				r := w
				if p, ok := w.(*postgres.Store); ok {
					r = openOn(b, pgtest.WithSearchPath(pgtest.ServerDSN(), p.Schema()), postgres.Options{})
				}
				benchFanout(b, w, r, n)
			})
		}
	}
}

func benchFanout(b *testing.B, w, r store.Store, n int) {
	must(b, w.Update(ctx, func(tx store.Tx) error { return tx.CreateRun("t", store.Run{ID: "r"}) }))
	total := uint64(b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	for range n {
		wg.Go(func() {
			after, got := uint64(0), uint64(0)
			for got < total {
				ch := r.Changed()
				var evs []store.Event
				must(b, r.View(ctx, func(tx store.ReadTx) error {
					var err error
					evs, err = tx.Events("t", "r", after, 256)
					return err
				}))
				for _, ev := range evs {
					after = ev.Seq
					got++
				}
				if len(evs) == 0 {
					<-ch
				}
			}
		})
	}
	for range b.N {
		must(b, w.Update(ctx, func(tx store.Tx) error { _, err := tx.AppendEvent("t", "r", body); return err }))
	}
	testkit.Wait(b, &wg)
	b.ReportMetric(float64(b.N)*float64(n)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkCrossReplicaWakeup measures, one commit at a time, the time
// from the start of a commit on replica A to the moment a watcher on
// replica B has read the event (woken by NOTIFY, then one read).
// Reported: p50 and p99 in microseconds, and A's commit time alone.
func BenchmarkCrossReplicaWakeup(b *testing.B) {
	dsn, _ := pgtest.Schema(b)
	a, r := openOn(b, dsn, postgres.Options{}), openOn(b, dsn, postgres.Options{})
	must(b, a.Update(ctx, func(tx store.Tx) error { return tx.CreateRun("t", store.Run{ID: "r"}) }))
	lat := make([]time.Duration, 0, b.N)
	commit := make([]time.Duration, 0, b.N)
	after := uint64(0)
	for b.Loop() {
		ch := r.Changed()
		start := time.Now()
		must(b, a.Update(ctx, func(tx store.Tx) error { _, err := tx.AppendEvent("t", "r", body); return err }))
		commit = append(commit, time.Since(start))
		for {
			testkit.Recv(b, ch)
			ch = r.Changed()
			var evs []store.Event
			must(b, r.View(ctx, func(tx store.ReadTx) error {
				var err error
				evs, err = tx.Events("t", "r", after, 10)
				return err
			}))
			if len(evs) > 0 {
				after = evs[len(evs)-1].Seq
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.ReportMetric(pct(lat, 50), "p50-µs")
	b.ReportMetric(pct(lat, 99), "p99-µs")
	b.ReportMetric(pct(commit, 50), "commit-p50-µs")
}

func pct(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[(len(s)-1)*p/100].Microseconds())
}

// BenchmarkAppendEvidence measures one append of an agent process's
// evidence (three records, as a prompt, its output and its end) to a run,
// one after another: alone, and beside a writer committing events to
// another run all along (the settlements and log lines an append meets
// when an agent ends). Run with:
//
//	go test -run '^$' -bench AppendEvidence -benchtime 2000x ./store/postgres/
func BenchmarkAppendEvidence(b *testing.B) {
	recs := []store.EvidenceRecord{
		{Execution: "s1/1", Kind: "prompt", Data: bytes.Repeat([]byte("p"), 512)},
		{Execution: "s1/1", Kind: "stdout", Data: bytes.Repeat([]byte("o"), 256)},
		{Execution: "s1/1", Kind: "exit", Attr: "0"},
	}
	for _, beside := range []bool{false, true} {
		b.Run(fmt.Sprintf("beside-commits=%v", beside), func(b *testing.B) {
			pgtest.Require(b)
			s := open(b, postgres.Options{})
			must(b, s.Update(ctx, func(tx store.Tx) error {
				if err := tx.CreateRun("t", store.Run{ID: "r"}); err != nil {
					return err
				}
				return tx.CreateRun("t", store.Run{ID: "other"})
			}))
			var ev store.Evidence = s
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if beside {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := s.Update(ctx, func(tx store.Tx) error {
							_, err := tx.AppendEvent("t", "other", func(uint64) ([]byte, error) { return []byte(`{}`), nil })
							return err
						}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.ResetTimer()
			for range b.N {
				if err := ev.AppendEvidence(ctx, "t", "r", recs); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
		})
	}
}
