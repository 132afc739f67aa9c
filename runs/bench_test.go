package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/sqlite"
)

// Shape of BenchmarkRuns: benchRuns one-step runs submitted concurrently
// over benchConns WebSocket connections, under the default bound of 16
// active executions.
const (
	benchRuns  = 1000
	benchConns = 16
	benchBound = 16
)

// BenchmarkRuns measures native runs finished per second: one op submits
// benchRuns one-step runs over benchConns WebSocket connections at once
// (each connection watches each of its runs once its submit is answered)
// and ends when the last watch closes done. The baseline is the same
// number of raw store commits (one event each, from as many goroutines)
// on the same kind of store. Run with:
//
//	go test -run '^$' -bench Runs -benchtime 3x ./runs/
func BenchmarkRuns(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"memory", func(*testing.B) store.Store { return store.NewMemory() }},
		{"sqlite-normal", func(b *testing.B) store.Store {
			s, err := sqlite.Open(context.Background(), sqlite.Options{Dir: b.TempDir(), Sync: sqlite.SyncNormal})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	for _, st := range stores {
		b.Run("runs/"+st.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s := st.open(b)
				r := newRig(b, s, benchBound)
				srv := wiretest.NewWSServer(b, wireBackend{Backend: cluster.NewFixture(cluster.Isolated), rb: r.b}, wiretest.Options{})
				wires := make([]*wiretest.WSWire, benchConns)
				for i := range wires {
					wires[i] = srv.Dial(b, nil)
				}
				b.StartTimer()
				var wg sync.WaitGroup
				for i, w := range wires {
					wg.Add(1)
					go func() { defer wg.Done(); driveConn(b, w, i) }()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(b.N*benchRuns)/b.Elapsed().Seconds(), "runs/s")
		})
		b.Run("commits/"+st.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s := st.open(b)
				b.StartTimer()
				rawCommits(b, s)
				b.StopTimer()
				_ = s.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N*benchRuns)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// driveConn submits connection i's share of the runs, watches each once
// it is admitted, and returns when every watch has closed done.
func driveConn(b *testing.B, w *wiretest.WSWire, i int) {
	var mu sync.Mutex
	send := func(frame string) {
		mu.Lock()
		defer mu.Unlock()
		if err := w.Send(frame); err != nil {
			b.Error(err)
		}
	}
	n := 0
	for k := i; k < benchRuns; k += benchConns {
		id := fmt.Sprintf("bench-%d", k)
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"run/submit","params":{"runId":%q,"submission":%s}}`, id, id, oneStep(id, "echo")))
		n++
	}
	for done := 0; done < n; {
		frame, err := w.Recv()
		if err != nil {
			b.Error(err)
			return
		}
		var m struct {
			ID     string          `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		_ = json.Unmarshal([]byte(frame), &m)
		switch {
		case m.Error != nil:
			b.Errorf("error frame %s", frame)
			return
		case strings.HasPrefix(m.ID, "bench-"):
			send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"w-%s","method":"run/watch","params":{"runId":%q}}`, m.ID, m.ID))
		case m.Method == "subscription/closed":
			done++
		}
	}
}

// rawCommits is the baseline: benchRuns store commits of one event each,
// from benchConns goroutines.
func rawCommits(b *testing.B, s store.Store) {
	ctx := context.Background()
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateRun("t", store.Run{ID: "r"}) }); err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"kind":"node_completed"}`)
	var wg sync.WaitGroup
	for i := range benchConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := i; k < benchRuns; k += benchConns {
				err := s.Update(ctx, func(tx store.Tx) error {
					_, err := tx.AppendEvent("t", "r", func(uint64) ([]byte, error) { return body, nil })
					return err
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
