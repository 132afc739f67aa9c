package websocket

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// errWouldWait fails a write that cannot complete without waiting on the
// peer once the connection is closing.
var errWouldWait = errors.New("the peer is not reading")

// socket is the connection under a WebSocket, hijacked from the HTTP
// server: every byte the library writes goes through its Write. It knows
// whether a write is waiting on the peer, so that a close never waits
// behind a stuck write.
//
// Rules: the library writes frames one at a time (its own lock), so Write
// never runs concurrently with itself; mu guards the flags only and is
// never held across a write to the network.
type socket struct {
	net.Conn
	// raw writes without waiting; nil when the connection is not a plain
	// socket (TLS), whose writes cannot be attempted without waiting.
	raw syscall.RawConn

	mu      sync.Mutex
	waiting bool // a write is in a network call that may wait on the peer
	closing bool // writes no longer wait: one attempt, else errWouldWait
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

// Write writes p to the network, waiting on the peer if need be until the
// connection is closing; from then on it writes what the peer can take at
// once and fails if that is not all of p.
func (s *socket) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.closing && s.raw != nil {
		s.mu.Unlock()
		n, err := s.writeNoWait(p)
		if err == nil && n < len(p) {
			err = errWouldWait
		}
		return n, err
	}
	s.waiting = true
	s.mu.Unlock()
	n, err := s.Conn.Write(p)
	s.mu.Lock()
	s.waiting = false
	s.mu.Unlock()
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

// startClosing switches writes to never wait, unless a write is waiting on
// the peer right now: then it reports false, and a close frame could only
// go out after it (the caller closes without one).
func (s *socket) startClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting {
		return false
	}
	s.closing = true
	return true
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
