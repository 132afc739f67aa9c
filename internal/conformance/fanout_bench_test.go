package conformance

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	ws "github.com/coder/websocket"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
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

// fanoutSide is one server under test with its subscribed connections;
// produce(k) publishes its k-th event (k counts from 1 across runs).
type fanoutSide struct {
	conns   []*ws.Conn
	produce func(k int)
	sent    int
	stop    func()
}

// run delivers n more events to every connection and returns how long it
// took.
func (s *fanoutSide) run(b *testing.B, n int) time.Duration {
	start := time.Now()
	first := s.sent
	runFanout(b, s.conns, n, func(k int) { s.produce(first + k) })
	s.sent += n
	return time.Since(start)
}

// oecpFanout serves oecp's watch over WebSocket to subs raw clients, each
// watching the one run; it also returns the encoded frame of one update
// event as the subscribers receive it.
func oecpFanout(b *testing.B, subs int) (*fanoutSide, []byte) {
	be := cluster.NewFixture(cluster.Isolated)
	srv := wiretest.NewWSServer(b, be, wiretest.Options{})
	ctx := identity.With(context.Background(), identity.Local())
	key := "fanout"
	if _, err := be.Apply(ctx, protocol.ApplyParams{Graph: []byte(benchGraph), Input: protocol.Null, HasInput: true, IdempotencyKey: &key}); err != nil {
		b.Fatal(err)
	}
	s := &fanoutSide{conns: make([]*ws.Conn, subs)}
	for i := range s.conns {
		s.conns[i] = dialRaw(b, srv.URL)
		if err := s.conns[i].Write(context.Background(), ws.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"watch","params":{}}`)); err != nil {
			b.Fatal(err)
		}
		// The response, then the admission event.
		for j := 0; j < 2; j++ {
			if _, _, err := s.conns[i].Read(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
	s.produce = func(k int) {
		// One event: an update of the log level (a phase record).
		u := protocol.UpdateParams{LogLevel: &benchLevel, IfGeneration: 1, IdempotencyKey: fmt.Sprintf("u%d", k)}
		if _, err := be.Update(ctx, u); err != nil {
			b.Fatal(err)
		}
	}
	s.stop = func() {
		for _, c := range s.conns {
			_ = c.CloseNow()
		}
	}
	// One event, read on every connection, keeps a sample frame.
	s.produce(1)
	s.sent = 1
	var frame []byte
	for i, c := range s.conns {
		_, data, err := c.Read(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			frame = data
		}
	}
	return s, frame
}

// bareFanout serves a bare coder/websocket broadcast of frame to subs
// clients: one writer goroutine per connection fed from a shared frame, no
// protocol work.
func bareFanout(b *testing.B, subs int, frame []byte) *fanoutSide {
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
	url := "ws://" + ln.Addr().String()
	s := &fanoutSide{conns: make([]*ws.Conn, subs)}
	for i := range s.conns {
		s.conns[i] = dialRaw(b, url)
		testkit.Recv(b, ready)
	}
	s.produce = func(k int) {
		mu.Lock()
		for _, f := range feeds {
			f <- k
		}
		mu.Unlock()
	}
	s.stop = func() {
		mu.Lock()
		for _, f := range feeds {
			close(f)
		}
		mu.Unlock()
		for _, c := range s.conns {
			_ = c.CloseNow()
		}
		_ = srv.Close()
	}
	return s
}

// bareFrame stands in for an oecp event frame where none was sampled.
var bareFrame = []byte(`{"jsonrpc":"2.0","method":"event","params":{"subscriptionId":"sub-1","runId":"run-1","cursor":"cursor-2","event":{"type":"fault","fault":{"eventId":"evt-1","code":"unavailable","consequence":"turn_failed","retry":"retryable_after_backoff","action":"retry","severity":"error","summary":"upstream worker unavailable","source":[{"component":"worker-dispatch"}]}}}}`)

// BenchmarkWatchFanoutWebSocket: oecp's watch over WebSocket.
func BenchmarkWatchFanoutWebSocket(b *testing.B) {
	for _, subs := range fanoutSubs {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) {
			s, _ := oecpFanout(b, subs)
			defer s.stop()
			b.ResetTimer()
			d := s.run(b, b.N)
			b.ReportMetric(float64(b.N)*float64(subs)/d.Seconds(), "events/s")
		})
	}
}

// BenchmarkFanoutBaselineBareWebSocket: the same frames broadcast by a bare
// coder/websocket server: the limit oecp is compared against.
func BenchmarkFanoutBaselineBareWebSocket(b *testing.B) {
	for _, subs := range fanoutSubs {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) {
			s := bareFanout(b, subs, bareFrame)
			defer s.stop()
			b.ResetTimer()
			d := s.run(b, b.N)
			b.ReportMetric(float64(b.N)*float64(subs)/d.Seconds(), "events/s")
		})
	}
}

// fanoutRound is how many events each side delivers before the other
// takes a turn in BenchmarkFanoutVsBare.
const fanoutRound = fanoutBatch

// BenchmarkFanoutVsBare runs oecp's watch and the bare broadcast of the
// very frames oecp sends side by side, alternating short rounds of events,
// so both see the same machine load. It reports each one's delivered
// events/s and their ratio, and the process CPU time per delivered event
// (server and in-process clients together; the clients' share is the same
// on both sides).
func BenchmarkFanoutVsBare(b *testing.B) {
	for _, subs := range fanoutSubs {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) {
			o, frame := oecpFanout(b, subs)
			defer o.stop()
			bare := bareFanout(b, subs, frame)
			defer bare.stop()
			var to, tb, co, cb time.Duration
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(fanoutRound, b.N-done)
				c0 := cpuTime()
				to += o.run(b, n)
				c1 := cpuTime()
				tb += bare.run(b, n)
				co, cb = co+c1-c0, cb+cpuTime()-c1
				done += n
			}
			b.StopTimer()
			total := float64(b.N) * float64(subs)
			b.ReportMetric(total/to.Seconds(), "oecp-events/s")
			b.ReportMetric(total/tb.Seconds(), "bare-events/s")
			b.ReportMetric(tb.Seconds()/to.Seconds(), "oecp/bare")
			b.ReportMetric(float64(co.Nanoseconds())/total, "oecp-cpu-ns/event")
			b.ReportMetric(float64(cb.Nanoseconds())/total, "bare-cpu-ns/event")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runFanout delivers n events on every connection of conns while
// produce(k) publishes the k-th (k = 1..n), waiting for the readers every
// fanoutBatch events.
func runFanout(b *testing.B, conns []*ws.Conn, n int, produce func(k int)) {
	p := newPacer(len(conns))
	var wg sync.WaitGroup
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
}

const benchGraph = `{"profile":"openengine.graph.single-worker/v1","initialInput":{"kind":"null"},"policy":{"policy":"policy.default@1","default":"deny"},"root":{"kind":"step","name":"worker","worker":"legacy.zeroshot.ship@1","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":1000,"attempts":1}}`
