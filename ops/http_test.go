package ops_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	ws "github.com/coder/websocket"

	"github.com/oecp/oecp/ops"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/transport/websocket"
)

// TestDNSRebindingUpgradeIsRefused: on a server without authentication an
// upgrade whose Host (and matching Origin) is not loopback gets 421 and
// reaches no backend; loopback names and --allow-host patterns pass.
func TestDNSRebindingUpgradeIsRefused(t *testing.T) {
	b := &countingBackend{}
	mux := http.NewServeMux()
	mux.Handle("/oecp", &websocket.Handler{Dispatcher: &server.Dispatcher{Backend: b}})
	h := ops.HostGuard(mux, []string{"*.internal.example"}, slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(h)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := net.SplitHostPort(addr)
	url := "ws://" + addr + "/oecp"
	dial := func(host string) (int, error) {
		hdr := http.Header{}
		hdr.Set("Origin", "http://"+host)
		c, resp, err := ws.Dial(context.Background(), url, &ws.DialOptions{HTTPHeader: hdr, Host: host})
		if err != nil {
			if resp == nil {
				return 0, err
			}
			return resp.StatusCode, err
		}
		defer c.CloseNow()
		if err := c.Write(context.Background(), ws.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"get","params":{}}`)); err != nil {
			return 0, err
		}
		_, _, err = c.Read(context.Background())
		return http.StatusSwitchingProtocols, err
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.evil.example:" + port} {
		if code, _ := dial(host); code != http.StatusMisdirectedRequest {
			t.Errorf("Host %s: HTTP %d, want 421", host, code)
		}
	}
	if n := b.calls.Load(); n != 0 {
		t.Fatalf("%d backend calls from refused upgrades", n)
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "ci.internal.example:" + port} {
		if code, err := dial(host); code != http.StatusSwitchingProtocols || err != nil {
			t.Errorf("Host %s: HTTP %d, %v; want an upgrade and an answer", host, code, err)
		}
	}
}

// pipeListener hands out the server ends of net.Pipe connections, so
// that an http.Server runs inside a synctest bubble.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// Dial returns the client end of a new connection.
func (l *pipeListener) Dial() net.Conn {
	client, srv := net.Pipe()
	l.conns <- srv
	return client
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// serveInBubble serves h with cfg on a pipe listener; the caller runs
// inside synctest.Test.
func serveInBubble(t *testing.T, h http.Handler, cfg ops.HTTPConfig, lg *slog.Logger) *pipeListener {
	ln := newPipeListener()
	srv := ops.NewServer(ops.Deadlines(h, cfg, "/oecp"), cfg, lg)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln
}

// dialInBubble serves echoBody with the default configuration and
// returns a connection to it; the caller runs inside synctest.Test.
func dialInBubble(t *testing.T) (net.Conn, ops.HTTPConfig) {
	cfg := ops.DefaultHTTPConfig
	c := serveInBubble(t, echoBody(), cfg, slog.New(slog.DiscardHandler)).Dial()
	t.Cleanup(func() { _ = c.Close() })
	return c, cfg
}

// closedByServer reads c until the server closes it.
func closedByServer(c net.Conn) bool {
	_, err := io.Copy(io.Discard, c)
	return err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)
}

func echoBody() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "done\n")
	})
	return mux
}

// TestIdleKeepAliveIsClosed: a keep-alive connection idle after a
// /healthz is closed by the idle timeout (without one, the bubble would
// deadlock: nothing would ever close it).
func TestIdleKeepAliveIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, cfg := dialInBubble(t)
		start := time.Now()
		go func() { _, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") }()
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("healthz: %v %v", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if !closedByServer(c) {
			t.Fatal("idle connection was not closed")
		}
		if idle := time.Since(start); idle < cfg.IdleTimeout {
			t.Fatalf("closed after %v, before the idle timeout %v", idle, cfg.IdleTimeout)
		}
	})
}

// TestStalledBodyIsClosed: a POST whose body never arrives is cut off by
// the read timeout.
func TestStalledBodyIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := dialInBubble(t)
		go func() {
			_, _ = io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\npartial")
		}()
		if !closedByServer(c) {
			t.Fatal("stalled POST was not closed")
		}
	})
}

// TestPlainConnectionsAreBounded: past MaxPlainConns a new connection is
// closed as it is accepted; once one closes, a new one is served.
func TestPlainConnectionsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := ops.DefaultHTTPConfig
		cfg.MaxPlainConns = 2
		ln := serveInBubble(t, echoBody(), cfg, slog.New(slog.DiscardHandler))
		a, b := ln.Dial(), ln.Dial()
		defer b.Close()
		over := ln.Dial()
		if !closedByServer(over) {
			t.Fatal("connection past the bound was not closed")
		}
		_ = a.Close()
		synctest.Wait()
		c := ln.Dial()
		defer c.Close()
		go func() { _, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") }()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("after one closed: %v %v", resp, err)
		}
	})
}

// logSink collects log output from concurrent writers.
type logSink struct {
	mu  sync.Mutex
	buf []byte
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.buf = append(s.buf, p...)
	s.mu.Unlock()
	return len(p), nil
}

func (s *logSink) String() string { s.mu.Lock(); defer s.mu.Unlock(); return string(s.buf) }

// TestHandlerPanicIsLoggedAtError: net/http's own error log (recovered
// panics, accept failures) reaches slog at error level, not debug.
func TestHandlerPanicIsLoggedAtError(t *testing.T) {
	var logs logSink
	lg := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	mux := http.NewServeMux()
	mux.HandleFunc("/boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	srv := ops.NewServer(mux, ops.DefaultHTTPConfig, lg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	if _, err := http.Get("http://" + ln.Addr().String() + "/boom"); err == nil {
		t.Fatal("a panicking handler answered")
	}
	got := logs.String()
	if !strings.Contains(got, `"level":"ERROR"`) || !strings.Contains(got, "panic serving") {
		t.Fatalf("log = %s", got)
	}
}
