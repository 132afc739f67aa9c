package store

import (
	"fmt"
	"sync"
)

// Gate is the close discipline of a store: Close waits for the
// transactions in flight, and a transaction that starts once Close has
// begun (even one nested in another) fails with ErrClosed rather than
// deadlock. The zero Gate is open.
type Gate struct {
	mu       sync.Mutex
	drained  sync.Cond
	inflight int
	closed   bool
}

// Enter registers a transaction; it fails with ErrClosed once Close has
// begun. Every successful Enter is paired with one Exit.
func (g *Gate) Enter() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	g.inflight++
	return nil
}

// Exit ends a transaction registered by Enter.
func (g *Gate) Exit() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight--; g.inflight == 0 && g.closed {
		g.cond().Broadcast()
	}
}

// Close refuses new transactions and waits for those in flight. A second
// Close fails with ErrClosed.
func (g *Gate) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	g.closed = true
	for g.inflight > 0 {
		g.cond().Wait()
	}
	return nil
}

// cond is the drained condition; the caller holds g.mu.
func (g *Gate) cond() *sync.Cond {
	if g.drained.L == nil {
		g.drained.L = &g.mu
	}
	return &g.drained
}

// Signal is a store's Changed channel: a channel closed (and replaced) by
// every Wake. The zero Signal is ready.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// Changed returns the channel the next Wake closes.
func (s *Signal) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Wake closes the channel returned by Changed so far.
func (s *Signal) Wake() {
	s.mu.Lock()
	ch := s.ch
	s.ch = make(chan struct{})
	s.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// NewEvent is the event that appending encode's body to run r at sequence
// seq records: ErrNoRun when the run does not exist (found false),
// ErrTombstoned when it is tombstoned, and encode's error when it fails.
func NewEvent(r Run, found bool, seq uint64, encode func(seq uint64) ([]byte, error)) (Event, error) {
	if !found {
		return Event{}, fmt.Errorf("%w: %q", ErrNoRun, r.ID)
	}
	if r.Tombstoned {
		return Event{}, fmt.Errorf("%w: %q", ErrTombstoned, r.ID)
	}
	body, err := encode(seq)
	if err != nil {
		return Event{}, err
	}
	return Event{Seq: seq, RunID: r.ID, Index: r.Count + 1, Body: body}, nil
}
