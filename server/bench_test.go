package server_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/metrics"
	"github.com/oecp/oecp/ops"
	"github.com/oecp/oecp/server"
)

// memTransport feeds pre-encoded frames to a connection and counts its
// answers, with no I/O: it isolates the connection core's cost per
// request.
type memTransport struct {
	in  chan []byte
	out chan struct{}
}

func (t *memTransport) ReadFrame() ([]byte, error) {
	b, ok := <-t.in
	if !ok {
		return nil, errors.New("eof")
	}
	return b, nil
}
func (t *memTransport) WriteFrame([]byte) error        { t.out <- struct{}{}; return nil }
func (t *memTransport) Flush() error                   { return nil }
func (t *memTransport) Close(server.CloseReason) error { return nil }

// benchRequests serves b.N gets, window at a time, on one connection.
// inline answers them on the reader (InlineReads); otherwise each runs on
// its own goroutine, the path of every mutation.
func benchRequests(b *testing.B, inline bool, opts server.Options) {
	const window = 16
	frames := make([][]byte, window)
	for i := range frames {
		frames[i] = []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"get","params":{}}`)
	}
	t := &memTransport{in: make(chan []byte, window), out: make(chan struct{}, window)}
	d := &server.Dispatcher{Backend: server.EmptyBackend{}, InlineReads: inline}
	c := server.NewConn(d, t, identity.Local(), opts)
	done := make(chan struct{})
	go func() { c.Serve(context.Background()); close(done) }()
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	for ; sent < min(window, b.N); sent++ {
		t.in <- frames[sent%window]
	}
	for got := 0; got < b.N; got++ {
		<-t.out
		if sent < b.N {
			t.in <- frames[got%window]
			sent++
		}
	}
	b.StopTimer()
	close(t.in)
	testkit.Recv(b, done)
}

func BenchmarkGetInline(b *testing.B) { benchRequests(b, true, server.Options{}) }
func BenchmarkGetTask(b *testing.B)   { benchRequests(b, false, server.Options{}) }

// The observed variants report to what `oecp serve` uses: the metrics
// and the access log (which logs nothing for a get).
func served() server.Options {
	return server.Options{Observer: server.Tee(metrics.New(), ops.AccessLog{Log: slog.New(slog.DiscardHandler)})}
}

func BenchmarkGetInlineObserved(b *testing.B) { benchRequests(b, true, served()) }
func BenchmarkGetTaskObserved(b *testing.B)   { benchRequests(b, false, served()) }
