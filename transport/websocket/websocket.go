// Package websocket is the WebSocket binding of the OECP connection core
// (github.com/coder/websocket): one JSON-RPC object per text message,
// binary → close 1003, over 1 MiB → close 1009, identity expiry → close
// 4401, server shutdown → close 1001; a close never waits behind a write
// stuck on a peer that does not read (that peer sees 1006). It resolves
// the connection identity on the upgrade request (HTTP 401 without
// upgrade when that fails), from an Authorization: Bearer header or a
// token offered as a subprotocol (bearer.go), and knows nothing of
// methods.
package websocket

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"unicode/utf8"

	ws "github.com/coder/websocket"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/tracing"
)

// Close codes of the binding beyond the library's own.
const (
	CodeUnsupported = ws.StatusUnsupportedData // 1003: a binary message
	CodeTooBig      = ws.StatusMessageTooBig   // 1009: over protocol.MaxFrameBytes
	CodeExpired     = ws.StatusCode(4401)      // the connection identity expired
	CodeGoingAway   = ws.StatusGoingAway       // 1001: the server is shutting down
)

// Close reasons, one per close code the binding sends. They stay well
// under the 123-byte limit of a close frame, or the library would send
// 1011 instead.
const (
	ReasonBinary    = "binary frames are not supported" // CodeUnsupported
	ReasonTooBig    = "message too big"                 // CodeTooBig
	ReasonExpired   = "connection identity expired"     // CodeExpired
	ReasonGoingAway = "server shutting down"            // CodeGoingAway
	ReasonStalled   = "peer stopped reading"            // 1008, policy violation
	ReasonInternal  = "connection failed"               // 1011, internal error
)

const errBinaryMessage = "binary message"

// errClosedByPolicy ends the reader after the binding closed the socket.
var errClosedByPolicy = errors.New("websocket closed by policy")

// Transport adapts one accepted *ws.Conn to the connection core. ReadFrame
// is for one reader; WriteFrame writes one whole message and Close is safe
// from any goroutine.
type Transport struct {
	c    *ws.Conn
	sock *socket // nil when the connection was not hijacked by Handler
	buf  bytes.Buffer

	mu     sync.Mutex
	closed bool
}

// NewTransport wraps an accepted connection. It disables the library's own
// read limit: the binding enforces protocol.MaxFrameBytes itself so that
// the close reason is the reference's.
func NewTransport(c *ws.Conn) *Transport {
	c.SetReadLimit(-1)
	return &Transport{c: c}
}

// ReadFrame reads one text message of at most protocol.MaxFrameBytes. The
// frame is valid until the next call.
func (t *Transport) ReadFrame() ([]byte, error) {
	typ, r, err := t.c.Reader(context.Background())
	if err != nil {
		return nil, err
	}
	if typ != ws.MessageText {
		t.closeWith(CodeUnsupported, ReasonBinary)
		return nil, errors.New(errBinaryMessage)
	}
	t.buf.Reset()
	n, err := t.buf.ReadFrom(io.LimitReader(r, protocol.MaxFrameBytes+1))
	if err != nil {
		return nil, err
	}
	if n > protocol.MaxFrameBytes {
		t.closeWith(CodeTooBig, ReasonTooBig)
		return nil, errClosedByPolicy
	}
	data := t.buf.Bytes()
	if !utf8.Valid(data) {
		// The reference ends the connection without a code.
		_ = t.c.CloseNow()
		return nil, errors.New("invalid UTF-8 in text message")
	}
	return data, nil
}

// WriteFrame writes one text message; on a connection Handler accepted
// it is buffered until Flush, so a batch of frames goes out in one write.
func (t *Transport) WriteFrame(b []byte) error {
	if t.sock == nil {
		return t.c.Write(context.Background(), ws.MessageText, b)
	}
	return t.sock.appendFrame(b)
}

// Flush pushes buffered frames to the peer.
func (t *Transport) Flush() error {
	if t.sock == nil {
		return nil
	}
	return t.sock.flush()
}

// noWaitTransport is a Transport over a plain socket, which can also write
// frames without waiting on the peer (server.NoWaitWriter).
type noWaitTransport struct{ *Transport }

// WriteFrameHeld buffers one text message until the next flush.
func (t noWaitTransport) WriteFrameHeld(b []byte) error { return t.WriteFrame(b) }

// FlushNoWait pushes buffered frames as far as the peer takes them at
// once; owed reports that the rest waits for the next Flush.
func (t noWaitTransport) FlushNoWait() (owed bool, err error) { return t.sock.flushNoWait() }

// OnInputWait makes the socket call f before each read from the network.
func (t noWaitTransport) OnInputWait(f func()) { t.sock.inputWait = f }

// closeWith closes with code and reason. The close frame goes out only if
// it can without waiting on the peer: a write stuck on a peer that does
// not read ends at once, and the connection closes without a close frame
// (the peer sees 1006), which could only have followed the stuck write.
func (t *Transport) closeWith(code ws.StatusCode, reason string) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	t.mu.Unlock()
	if t.sock != nil {
		t.sock.startClosing()
	}
	_ = t.c.Close(code, reason)
}

// Close maps a core close reason to a close code.
func (t *Transport) Close(reason server.CloseReason) error {
	switch reason {
	case server.CloseExpired:
		t.closeWith(CodeExpired, ReasonExpired)
	case server.CloseGoingAway:
		t.closeWith(CodeGoingAway, ReasonGoingAway)
	case server.CloseStalled:
		t.closeWith(ws.StatusPolicyViolation, ReasonStalled)
	case server.CloseInternal:
		t.closeWith(ws.StatusInternalError, ReasonInternal)
	default:
		t.closeWith(ws.StatusNormalClosure, "")
	}
	return nil
}

// Handler upgrades HTTP requests at its mount point to OECP connections.
type Handler struct {
	Dispatcher *server.Dispatcher
	// Resolver resolves each connection's identity from the upgrade
	// request; failure answers HTTP 401 without upgrading.
	Resolver identity.Resolver
	// OriginPatterns widens the library's same-origin check
	// (--allow-origin); cross-origin upgrades are answered 403.
	OriginPatterns []string
	Options        server.Options
	// Limits, when set, admit each connection after its identity resolved
	// (HTTP 429 without upgrading when refused) and bound it.
	Limits server.Limits
	// Shutdown, when done, makes every connection drain and close 1001.
	Shutdown context.Context
	Log      *slog.Logger

	wg sync.WaitGroup
}

// ServeHTTP resolves the identity, upgrades, and serves the connection on
// a goroutine of its own, returning at once: the HTTP server's goroutine
// and its deep stack end with the upgrade, and an idle connection keeps
// only its reader's shallow one (Wait waits for it).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	conn, done := h.open(w, r)
	if conn == nil {
		return
	}
	shutdown := h.Shutdown
	if shutdown == nil {
		shutdown = context.Background()
	}
	go func() {
		defer done()
		conn.Serve(shutdown)
	}()
}

// open resolves the identity, admits and upgrades the connection; done
// releases what it holds once the connection has been served. It answers
// the HTTP request itself and returns nil when the connection is refused.
func (h *Handler) open(w http.ResponseWriter, r *http.Request) (conn *server.Conn, done func()) {
	log := h.Log
	if log == nil {
		log = slog.Default()
	}
	id := identity.Local()
	if h.Resolver != nil {
		rr, err := withSubprotocolBearer(r)
		if err == nil {
			id, err = h.Resolver.Resolve(rr)
		}
		if err != nil {
			http.Error(w, "unauthorized: "+err.Error(), http.StatusUnauthorized)
			return nil, nil
		}
	}
	now := h.Options.Now
	if now == nil {
		now = timeNow
	}
	if id.ExpiredAt(now()) {
		http.Error(w, "unauthorized: identity expired", http.StatusUnauthorized)
		return nil, nil
	}
	opts := h.Options
	opts.Binding, opts.Peer = "websocket", r.RemoteAddr
	// A caller's traceparent on the upgrade request makes its requests'
	// spans children of its own (nothing while tracing is off).
	opts.Caller = tracing.Remote(r.Header)
	closeLimits := func() {}
	if h.Limits != nil {
		lim, ok := h.Limits.Open(id)
		if !ok {
			http.Error(w, "too many connections for this principal", http.StatusTooManyRequests)
			return nil, nil
		}
		closeLimits = lim.Close
		opts.Limits = lim
	}
	// Counted before the upgrade hijacks the connection, so that Wait
	// after the HTTP server's shutdown never misses one being accepted.
	h.wg.Add(1)
	hj := &hijackSocket{ResponseWriter: w}
	c, err := ws.Accept(hj, r, &ws.AcceptOptions{OriginPatterns: h.OriginPatterns, Subprotocols: []string{Subprotocol}})
	if err != nil {
		log.Debug("websocket upgrade failed", "err", err)
		h.wg.Done()
		closeLimits()
		return nil, nil
	}
	t := NewTransport(c)
	t.sock = hj.sock
	var st server.Transport = t
	if t.sock != nil && t.sock.raw != nil {
		st = noWaitTransport{t}
	}
	return server.NewConn(h.Dispatcher, st, id, opts), func() {
		_ = c.CloseNow()
		h.wg.Done()
		closeLimits()
	}
}

// Wait blocks until every connection served by h has ended.
func (h *Handler) Wait() { h.wg.Wait() }
