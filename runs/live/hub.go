package live

import (
	"context"
	"sync"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

// window is how many events an execution keeps for subscribers that are
// behind (the reference's broadcast capacity).
const window = 256

// Hub is the windows of the executions running here, by key. It is safe
// for concurrent use.
type Hub struct {
	mu    sync.Mutex
	execs map[string]*Window
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{execs: map[string]*Window{}} }

// Window is one execution's event window: events[i] has position
// first+i. wake is closed (and replaced) on every change.
type Window struct {
	mu     sync.Mutex
	first  uint64
	events [][]byte
	ended  bool
	wake   chan struct{}
}

func newWindow() *Window { return &Window{wake: make(chan struct{})} }

var (
	workingEvent = []byte(`{"type":"working"}`)
	settledEvent = []byte(`{"type":"settled"}`)
)

// OutputEvent is the encoded attach event of one line of output.
func OutputEvent(text string) []byte {
	ev, _ := protocol.Marshal(protocol.AttachEvent{Type: "output", Text: &text})
	return ev
}

// Start opens the window of an execution that starts here.
func (h *Hub) Start(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.execs[key] = newWindow()
}

// Lookup returns the window of an execution running here, nil when there
// is none.
func (h *Hub) Lookup(key string) *Window {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.execs[key]
}

// Publish appends an output event; ev must be an encoded output event
// (OutputEvent).
func (h *Hub) Publish(key string, ev []byte) {
	if e := h.Lookup(key); e != nil {
		e.push(ev, false)
	}
}

// End appends settled and unregisters the execution: later lookups see
// it as no longer running here.
func (h *Hub) End(key string) {
	h.mu.Lock()
	e := h.execs[key]
	delete(h.execs, key)
	h.mu.Unlock()
	if e != nil {
		e.push(settledEvent, true)
	}
}

// lose drops the window: every subscriber is behind it now, and is
// closed SLOW_CONSUMER (events were lost on the way here).
func (e *Window) lose() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.first += uint64(len(e.events)) + 1
	e.events = nil
	close(e.wake)
	e.wake = make(chan struct{})
}

func (e *Window) push(ev []byte, last bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return
	}
	e.events = append(e.events, ev)
	if n := len(e.events) - window; n > 0 {
		e.events = append(e.events[:0:0], e.events[n:]...)
		e.first += uint64(n)
	}
	e.ended = last
	close(e.wake)
	e.wake = make(chan struct{})
}

// Follow returns a stream of the window's events from its current end,
// after a synthesized working event. prefix goes before each event in
// the notification (`,"runId":..,"execution":..,"event":`).
func (e *Window) Follow(prefix []byte) *Stream {
	e.mu.Lock()
	pos := e.first + uint64(len(e.events))
	e.mu.Unlock()
	return &Stream{e: e, prefix: prefix, pos: pos}
}

// Stream delivers one execution's events from the position it attached
// at; it is a server.Stream.
type Stream struct {
	e       *Window
	prefix  []byte
	pos     uint64
	started bool
}

func (s *Stream) rest(ev []byte) server.Notification {
	return server.Notification{Rest: append(append([]byte(nil), s.prefix...), ev...)}
}

// Next yields the next event, a terminal close, or waits.
func (s *Stream) Next(ctx context.Context) (server.Notification, error) {
	if !s.started {
		s.started = true
		return s.rest(workingEvent), nil
	}
	for {
		s.e.mu.Lock()
		switch {
		case s.pos < s.e.first:
			s.e.mu.Unlock()
			return server.Notification{Closed: protocol.SlowConsumer}, nil
		case s.pos < s.e.first+uint64(len(s.e.events)):
			ev := s.e.events[s.pos-s.e.first]
			s.pos++
			s.e.mu.Unlock()
			return s.rest(ev), nil
		case s.e.ended:
			s.e.mu.Unlock()
			return server.Notification{Closed: "done"}, nil
		}
		wake := s.e.wake
		s.e.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return server.Notification{}, ctx.Err()
		}
	}
}

// Close releases nothing: the stream holds no registration.
func (s *Stream) Close() {}
