package conformance

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"

	ws "github.com/coder/websocket"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/protocol"
)

// The watch fan-out benchmarks deliver events from one writer to N
// WebSocket subscribers on loopback, and compare with a bare broadcast of
// the same frames over coder/websocket (the physical limit of the
// library). Reported: delivered events per second. The writer stays within
// one batch of the slowest subscriber, below the 1,024-event slow-consumer
// bound.

const fanoutBatch = 256

var fanoutSubs = []int{1, 100, 1000}

var benchLevel = "info"

// fanoutReader counts event frames on one connection and reports progress
// in batches.
func fanoutReader(b *testing.B, c *ws.Conn, n int, progress func(k int)) {
	for k := 1; k <= n; {
		_, data, err := c.Read(context.Background())
		if err != nil {
			b.Errorf("read: %v", err)
			return
		}
		if !bytes.Contains(data, []byte(`"method":"event"`)) {
			continue
		}
		if k%fanoutBatch == 0 || k == n {
			progress(k)
		}
		k++
	}
}

// pacer keeps a writer within one batch of its slowest reader.
type pacer struct {
	mu   sync.Mutex
	cond *sync.Cond
	done []int
}

func newPacer(n int) *pacer {
	p := &pacer{done: make([]int, n)}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *pacer) report(i, k int) {
	p.mu.Lock()
	p.done[i] = k
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *pacer) wait(k int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		m := p.done[0]
		for _, d := range p.done[1:] {
			m = min(m, d)
		}
		if m >= k-fanoutBatch {
			return
		}
		p.cond.Wait()
	}
}

func dialRaw(b *testing.B, url string) *ws.Conn {
	c, _, err := ws.Dial(context.Background(), url, nil)
	if err != nil {
		b.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	return c
}

// BenchmarkWatchFanoutWebSocket: oecp's watch over WebSocket.
func BenchmarkWatchFanoutWebSocket(b *testing.B) {
	for _, subs := range fanoutSubs {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) {
			be := cluster.NewFixture(cluster.Isolated)
			srv := wiretest.NewWSServer(b, be, wiretest.Options{})
			ctx := identity.With(context.Background(), identity.Local())
			key := "fanout"
			if _, err := be.Apply(ctx, protocol.ApplyParams{Graph: []byte(benchGraph), Input: protocol.Null, HasInput: true, IdempotencyKey: &key}); err != nil {
				b.Fatal(err)
			}
			conns := make([]*ws.Conn, subs)
			for i := range conns {
				conns[i] = dialRaw(b, srv.URL)
				if err := conns[i].Write(context.Background(), ws.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"watch","params":{}}`)); err != nil {
					b.Fatal(err)
				}
				// The response, then the admission event.
				for j := 0; j < 2; j++ {
					if _, _, err := conns[i].Read(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
			}
			fanout(b, conns, func(k int) {
				// One event: an update of the log level (a phase record).
				u := protocol.UpdateParams{LogLevel: &benchLevel, IfGeneration: 1, IdempotencyKey: fmt.Sprintf("u%d", k)}
				if _, err := be.Update(ctx, u); err != nil {
					b.Fatal(err)
				}
			})
			for _, c := range conns {
				_ = c.CloseNow()
			}
		})
	}
}

// BenchmarkFanoutBaselineBareWebSocket: the same frames broadcast by a bare
// coder/websocket server (one writer goroutine per connection fed from a
// shared frame, no protocol work): the limit oecp is compared against.
func BenchmarkFanoutBaselineBareWebSocket(b *testing.B) {
	frame := []byte(`{"jsonrpc":"2.0","method":"event","params":{"subscriptionId":"sub-1","runId":"run-1","cursor":"cursor-2","event":{"type":"fault","fault":{"eventId":"evt-1","code":"unavailable","consequence":"turn_failed","retry":"retryable_after_backoff","action":"retry","severity":"error","summary":"upstream worker unavailable","source":[{"component":"worker-dispatch"}]}}}}`)
	for _, subs := range fanoutSubs {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) {
			var (
				mu    sync.Mutex
				feeds []chan int
				ready = make(chan struct{}, subs)
			)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c, err := ws.Accept(w, r, nil)
				if err != nil {
					return
				}
				feed := make(chan int, 1024)
				mu.Lock()
				feeds = append(feeds, feed)
				mu.Unlock()
				ready <- struct{}{}
				for range feed {
					if err := c.Write(context.Background(), ws.MessageText, frame); err != nil {
						return
					}
				}
				_ = c.Close(ws.StatusNormalClosure, "")
			})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := &http.Server{Handler: h}
			go func() { _ = srv.Serve(ln) }()
			defer srv.Close()
			url := "ws://" + ln.Addr().String()
			conns := make([]*ws.Conn, subs)
			for i := range conns {
				conns[i] = dialRaw(b, url)
				<-ready
			}
			fanout(b, conns, func(k int) {
				mu.Lock()
				for _, f := range feeds {
					f <- k
				}
				mu.Unlock()
			})
			mu.Lock()
			for _, f := range feeds {
				close(f)
			}
			mu.Unlock()
			for _, c := range conns {
				_ = c.CloseNow()
			}
		})
	}
}

// fanout times b.N events read on every connection of conns while
// produce(k) publishes the k-th, waiting for the readers every fanoutBatch
// events, and reports events/s.
func fanout(b *testing.B, conns []*ws.Conn, produce func(k int)) {
	n := b.N
	p := newPacer(len(conns))
	var wg sync.WaitGroup
	b.ResetTimer()
	for i, c := range conns {
		wg.Go(func() { fanoutReader(b, c, n, func(k int) { p.report(i, k) }) })
	}
	for k := 1; k <= n; k++ {
		produce(k)
		if k%fanoutBatch == 0 {
			p.wait(k)
		}
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(n)*float64(len(conns))/b.Elapsed().Seconds(), "events/s")
}

const benchGraph = `{"profile":"openengine.graph.single-worker/v1","initialInput":{"kind":"null"},"policy":{"policy":"policy.default@1","default":"deny"},"root":{"kind":"step","name":"worker","worker":"legacy.zeroshot.ship@1","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":1000,"attempts":1}}`
