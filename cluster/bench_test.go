package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

// BenchmarkWatchFanout measures watch delivery from one writer to N
// subscribers in process: each event is one store transaction (an update
// of the log level), encoded once at commit; every subscriber reads it
// from the store and frames it the way the connection core does (prefix +
// shared tail + "}}"), without re-encoding. The writer runs ahead of the
// slowest subscriber by at most one batch (below the 1,024 queue bound),
// so nobody is closed as a slow consumer. Reported: delivered events/s.
func BenchmarkWatchFanout(b *testing.B) {
	for _, subs := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) { benchFanout(b, subs) })
	}
}

// BenchmarkFrameBaseline is the per-delivery framing cost alone (the
// floor of the fan-out: copying a shared tail into a frame).
func BenchmarkFrameBaseline(b *testing.B) {
	rest := []byte(`,"runId":"run-1","cursor":"cursor-2","event":{"type":"fault","fault":{"eventId":"evt-1","code":"unavailable","consequence":"turn_failed","retry":"retryable_after_backoff","action":"retry","severity":"error","summary":"upstream worker unavailable","source":[{"component":"worker-dispatch"}]}}`)
	prefix := []byte(`{"jsonrpc":"2.0","method":"event","params":{"subscriptionId":"sub-1"`)
	var frame []byte
	for b.Loop() {
		frame = append(append(append(frame[:0], prefix...), rest...), '}', '}')
	}
	_ = frame
}

const benchBatch = 256

func benchFanout(b *testing.B, subs int) {
	be := cluster.NewFixture(cluster.Isolated)
	ctx := context.Background()
	if _, err := be.Apply(ctxFor("local"), applyP(goldenGraph, "bench", nil)); err != nil {
		b.Fatal(err)
	}
	streams := make([]*server.Subscription, subs)
	for i := range streams {
		s, err := be.Watch(ctxFor("local"), protocol.WatchParams{})
		if err != nil {
			b.Fatal(err)
		}
		streams[i] = s
		if _, err := s.Stream.Next(ctx); err != nil { // the admission event
			b.Fatal(err)
		}
	}
	n := b.N
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		minDone  = make([]int, subs)
		progress atomic.Int64
		wg       sync.WaitGroup
	)
	b.ResetTimer()
	for i, s := range streams {
		wg.Go(func() {
			prefix := append([]byte(`{"jsonrpc":"2.0","method":"event","params":{"subscriptionId":`), protocol.AppendString(nil, s.ID)...)
			var frame []byte
			for k := 1; k <= n; k++ {
				ev, err := s.Stream.Next(ctx)
				if err != nil || ev.Closed != "" {
					b.Errorf("subscriber %d: %v %q", i, err, ev.Closed)
					return
				}
				frame = append(append(append(frame[:0], prefix...), ev.Rest...), '}', '}')
				if k%benchBatch == 0 || k == n {
					mu.Lock()
					minDone[i] = k
					mu.Unlock()
					cond.Broadcast()
				}
			}
			progress.Add(1)
		})
	}
	for k := 1; k <= n; k++ {
		update(b, be, ctxFor("local"), fmt.Sprintf("u%d", k))
		if k%benchBatch == 0 {
			// Stay within one batch of the slowest subscriber.
			mu.Lock()
			for slowest(minDone) < k-benchBatch {
				cond.Wait()
			}
			mu.Unlock()
		}
	}
	testkit.Wait(b, &wg)
	b.StopTimer()
	b.ReportMetric(float64(n)*float64(subs)/b.Elapsed().Seconds(), "events/s")
	for _, s := range streams {
		s.Stream.Close()
	}
}

func slowest(done []int) int {
	m := done[0]
	for _, d := range done[1:] {
		m = min(m, d)
	}
	return m
}
