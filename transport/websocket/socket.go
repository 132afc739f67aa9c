package websocket

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// errWouldWait fails a write that cannot complete without waiting on the
// peer once the connection is closing; errBroken every write after a
// failed one; errClosing a data frame once a close frame may have gone.
var (
	errWouldWait = errors.New("the peer is not reading")
	errBroken    = errors.New("an earlier write failed")
	errClosing   = errors.New("the connection is closing")
)

// maxKeptPending bounds the write buffer a connection keeps between writes.
const maxKeptPending = 64 << 10

// socket is the connection under a WebSocket, hijacked from the HTTP
// server: every byte written to the peer goes through it. It lets frames
// be written without waiting on the peer, several frames go out in one
// write, and a close go out without waiting behind a stuck write.
//
// The core's data frames are framed here and appended to pend
// (appendFrame), and stay there until the write-role holder pushes them
// (push); what the library writes itself (a pong, a close frame) is
// appended and pushed at once (Write). Everything reaches the network
// through pend, in order, and no data frame follows a close frame.
//
// Locks: wmu serialises writes to the network and guards pend; it is held
// across a write that may wait on the peer, like the library's own frame
// lock, which is taken before it. mu guards the flags below and is taken
// after wmu, never held across a network write that may wait.
type socket struct {
	net.Conn
	// raw writes without waiting; nil when the connection is not a plain
	// socket (TLS), whose writes cannot be attempted without waiting.
	raw syscall.RawConn
	// inputWait, set before the connection is served, runs before every
	// read from the network (see Read).
	inputWait func()

	wmu  sync.Mutex
	pend []byte

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

// Read reads from the network for the library, after running inputWait:
// frames the core holds go out before a read that may wait for the peer.
func (s *socket) Read(p []byte) (int, error) {
	if s.inputWait != nil {
		s.inputWait()
	}
	return s.Conn.Read(p)
}

// Write takes p from the library (a control frame) and pushes it with
// what was pending, waiting if need be.
func (s *socket) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.pend = append(s.pend, p...)
	return len(p), s.push(true)
}

// appendFrame appends b to pend as one text message in a single frame,
// as a server sends it (unmasked, uncompressed), to be pushed by the next
// flush. Once the connection is closing or broken it fails instead: a
// close frame, written after closing is set and through wmu, is the last
// frame.
func (s *socket) appendFrame(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	closing, broken := s.closing, s.broken
	s.mu.Unlock()
	switch {
	case broken:
		return errBroken
	case closing:
		return errClosing
	}
	n := len(b)
	switch {
	case n <= 125:
		s.pend = append(s.pend, 0x81, byte(n))
	case n <= 0xffff:
		s.pend = append(s.pend, 0x81, 126, byte(n>>8), byte(n))
	default:
		s.pend = append(s.pend, 0x81, 127)
		s.pend = binary.BigEndian.AppendUint64(s.pend, uint64(n))
	}
	s.pend = append(s.pend, b...)
	return nil
}

// flush pushes what is pending, waiting on the peer if need be.
func (s *socket) flush() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.push(true)
}

// flushNoWait pushes what the peer takes at once; owed reports that bytes
// are still pending (the next flush must push them).
func (s *socket) flushNoWait() (owed bool, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	err = s.push(false)
	return len(s.pend) > 0, err
}

// push writes pend to the network. With wait it may wait on the peer
// until all is written; without, it writes what the peer takes at once and
// keeps the rest. Once closing it never waits and fails unless all is
// written. The caller holds wmu.
func (s *socket) push(wait bool) error {
	if len(s.pend) == 0 {
		return nil
	}
	s.mu.Lock()
	if s.broken {
		s.mu.Unlock()
		return errBroken
	}
	if s.closing {
		defer s.mu.Unlock()
		return s.pushClosing()
	}
	if !wait && s.raw != nil {
		s.mu.Unlock()
		n, err := s.writeNoWait(s.pend)
		s.consume(n)
		return s.failed(err)
	}
	s.waiting = true
	s.mu.Unlock()
	n, err := s.Conn.Write(s.pend)
	s.consume(n)
	s.mu.Lock()
	s.waiting = false
	s.mu.Unlock()
	return s.failed(err)
}

// pushClosing writes pend once the connection is closing (the close frame,
// or frames already on their way): only what the peer takes at once, and
// only whole, else the connection is broken. Over TLS it may still wait.
// The caller holds wmu and mu.
func (s *socket) pushClosing() error {
	if s.raw == nil {
		n, err := s.Conn.Write(s.pend)
		s.consume(n)
		s.broken = err != nil
		return err
	}
	if s.deadline {
		s.deadline = false
		if err := s.Conn.SetWriteDeadline(time.Time{}); err != nil {
			s.broken = true
			return err
		}
	}
	n, err := s.writeNoWait(s.pend)
	s.consume(n)
	if err == nil && len(s.pend) > 0 {
		err = errWouldWait
	}
	s.broken = err != nil
	return err
}

// failed marks the connection broken when err is set, and returns it.
func (s *socket) failed(err error) error {
	if err != nil {
		s.mu.Lock()
		s.broken = true
		s.mu.Unlock()
	}
	return err
}

// consume drops the first n pending bytes (they were written).
func (s *socket) consume(n int) {
	switch {
	case n >= len(s.pend) && cap(s.pend) > maxKeptPending:
		s.pend = nil
	case n >= len(s.pend):
		s.pend = s.pend[:0]
	case n > 0:
		s.pend = s.pend[:copy(s.pend, s.pend[n:])]
	}
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
