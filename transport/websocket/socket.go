package websocket

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// errWouldWait fails a write that cannot complete without waiting on the
// peer once the connection is closing.
var errWouldWait = errors.New("the peer is not reading")

// socket is the connection under a WebSocket, hijacked from the HTTP
// server: every byte the library writes goes through its Write. It lets a
// close go out without waiting on a peer that does not read.
//
// Rules: the library writes frames one at a time (its own lock), so Write
// never runs concurrently with itself; mu guards the fields below and is
// held across a write to the network only once closing (such writes never
// wait).
type socket struct {
	net.Conn
	// raw writes without waiting; nil when the connection is not a plain
	// socket (TLS), whose writes cannot be attempted without waiting.
	raw syscall.RawConn

	mu       sync.Mutex
	waiting  bool // a write is in a network call that may wait on the peer
	closing  bool // writes no longer wait: one attempt, else errWouldWait
	broken   bool // a write failed or was cut short: nothing may follow it
	deadline bool // a past write deadline was set to end a waiting write
}

func newSocket(c net.Conn) *socket {
	s := &socket{Conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			s.raw = raw
		}
	}
	return s
}

// Write writes p to the network, waiting on the peer if need be, until
// the connection is closing; from then on see writeClosing.
func (s *socket) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.closing {
		defer s.mu.Unlock()
		return s.writeClosing(p)
	}
	s.waiting = true
	s.mu.Unlock()
	n, err := s.Conn.Write(p)
	s.mu.Lock()
	s.waiting = false
	s.broken = s.broken || err != nil
	s.mu.Unlock()
	return n, err
}

// writeClosing writes p once the connection is closing (the close frame,
// or a frame that was already on its way): only what the peer takes at
// once, and only whole, else the connection is broken. Over TLS it may
// still wait. The caller holds mu.
func (s *socket) writeClosing(p []byte) (int, error) {
	if s.broken {
		return 0, errWouldWait
	}
	if s.raw == nil {
		n, err := s.Conn.Write(p)
		s.broken = err != nil
		return n, err
	}
	if s.deadline {
		s.deadline = false
		if err := s.Conn.SetWriteDeadline(time.Time{}); err != nil {
			s.broken = true
			return 0, err
		}
	}
	n, err := s.writeNoWait(p)
	if err == nil && n < len(p) {
		err = errWouldWait
	}
	s.broken = err != nil
	return n, err
}

// writeNoWait writes as much of p as the socket takes without waiting.
func (s *socket) writeNoWait(p []byte) (n int, err error) {
	werr := s.raw.Write(func(fd uintptr) bool {
		for n < len(p) {
			k, e := syscall.Write(int(fd), p[n:])
			if e == syscall.EINTR {
				continue
			}
			if k > 0 {
				n += k
			}
			if e != nil {
				if e != syscall.EAGAIN {
					err = e
				}
				break
			}
		}
		return true // never wait for the socket to become writable
	})
	if werr != nil {
		err = werr
	}
	return n, err
}

// startClosing switches writes to never wait. A write waiting on the peer
// right now fails at once (a past write deadline ends its wait) and
// breaks the connection, so no close frame follows it; a write that does
// not wait completes.
func (s *socket) startClosing() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	if s.waiting {
		s.deadline = true
		if s.Conn.SetWriteDeadline(time.Unix(1, 0)) != nil {
			s.broken = true
		}
	}
}

// hijackSocket hands the library the hijacked connection wrapped in a
// socket.
type hijackSocket struct {
	http.ResponseWriter
	sock *socket
}

func (h *hijackSocket) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.sock = newSocket(c)
	brw.Writer.Reset(h.sock)
	return h.sock, brw, nil
}
