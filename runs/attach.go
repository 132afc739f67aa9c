package runs

import (
	"context"
	"sync"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
)

// Live attach. Each active execution keeps a sliding window of its latest
// encoded attach events; a subscriber reads the window by position, so a
// publisher never waits for anyone. A subscriber that falls more than the
// window behind has lost events and is closed with SLOW_CONSUMER; one
// that reaches the end of an ended execution is closed with done. Nothing
// here is durable: the durable copy of an execution's output is its log.

// attachWindow is how many events an execution keeps for subscribers that
// are behind (the reference's broadcast capacity).
const attachWindow = 256

type attachHub struct {
	mu    sync.Mutex
	execs map[string]*liveExec
}

func newAttachHub() *attachHub { return &attachHub{execs: map[string]*liveExec{}} }

func attachKey(tk, runID, execution string) string { return tk + "\x00" + runID + "\x00" + execution }

// liveExec is one execution's event window: events[i] has position
// first+i. wake is closed (and replaced) on every change.
type liveExec struct {
	mu     sync.Mutex
	first  uint64
	events [][]byte
	ended  bool
	wake   chan struct{}
}

var (
	workingEvent = []byte(`{"type":"working"}`)
	settledEvent = []byte(`{"type":"settled"}`)
)

func outputEvent(text string) []byte {
	ev, _ := protocol.Marshal(protocol.AttachEvent{Type: "output", Text: &text})
	return ev
}

func (h *attachHub) start(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.execs[key] = &liveExec{wake: make(chan struct{})}
}

func (h *attachHub) lookup(key string) *liveExec {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.execs[key]
}

// publish appends an output event; ev must be an encoded output event.
func (h *attachHub) publish(key string, ev []byte) {
	if e := h.lookup(key); e != nil {
		e.push(ev, false)
	}
}

// end appends settled and unregisters the execution: later attaches see
// it as no longer active.
func (h *attachHub) end(key string) {
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
func (e *liveExec) lose() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.first += uint64(len(e.events)) + 1
	e.events = nil
	close(e.wake)
	e.wake = make(chan struct{})
}

func (e *liveExec) push(ev []byte, last bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return
	}
	e.events = append(e.events, ev)
	if n := len(e.events) - attachWindow; n > 0 {
		e.events = append(e.events[:0:0], e.events[n:]...)
		e.first += uint64(n)
	}
	e.ended = last
	close(e.wake)
	e.wake = make(chan struct{})
}

// attachStream delivers one execution's events from the position it
// attached at, after a synthesized working event.
type attachStream struct {
	e       *liveExec
	prefix  []byte // `,"runId":..,"execution":..,"event":`
	pos     uint64
	started bool
}

func (s *attachStream) rest(ev []byte) server.Notification {
	return server.Notification{Rest: append(append([]byte(nil), s.prefix...), ev...)}
}

// Next yields the next event, a terminal close, or waits.
func (s *attachStream) Next(ctx context.Context) (server.Notification, error) {
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
		if err := await(ctx, wake); err != nil {
			return server.Notification{}, err
		}
	}
}

// Close releases nothing: the stream holds no registration.
func (s *attachStream) Close() {}

// Attach streams an active execution's live output, running here or, on
// a store shared by replicas, on another replica. An unknown run or
// execution is NOT_FOUND; an execution that ended (or, on a store of one
// server, is not running in this process) is GONE.
func (b *Backend) Attach(ctx context.Context, runID, execution string) (*server.Subscription, error) {
	tk := b.tenant(ctx)
	key := attachKey(tk, runID, execution)
	e := b.live.lookup(key)
	if e == nil {
		active := false
		err := b.store.View(ctx, func(tx store.ReadTx) error {
			st, _, ok, err := loadRun(tx, tk, runID)
			switch {
			case err != nil:
				return err
			case !ok:
				return errNoRun
			case st.execByRef(execution) == nil:
				return errNoExec
			}
			active = st.Phase != PhaseFinished && st.execByRef(execution).End == nil
			return errExecGone
		})
		if active {
			e = b.relay.follow(b.store, key, b.execEnded(tk, runID, execution))
		}
		if e == nil {
			return nil, wire(err)
		}
	}
	e.mu.Lock()
	pos := e.first + uint64(len(e.events))
	e.mu.Unlock()
	prefix := append([]byte(`,"runId":`), protocol.AppendString(nil, runID)...)
	prefix = append(prefix, `,"execution":`...)
	prefix = protocol.AppendString(prefix, execution)
	prefix = append(prefix, `,"event":`...)
	id := b.nextSubscription("attach")
	return &server.Subscription{ID: id, Result: &SubscribeResult{SubscriptionID: id, RunID: runID, Execution: execution},
		Stream: &attachStream{e: e, prefix: prefix, pos: pos}, MaxEventBytes: protocol.MaxNotificationBytes}, nil
}

// execEnded reads whether an execution has ended (its run finished, or
// its record is gone).
func (b *Backend) execEnded(tk, runID, execution string) func(ctx context.Context) bool {
	return func(ctx context.Context) bool {
		ended := false
		err := b.store.View(ctx, func(tx store.ReadTx) error {
			st, _, ok, err := loadRun(tx, tk, runID)
			if err == nil {
				ended = !ok || st.Phase == PhaseFinished || st.execByRef(execution) == nil || st.execByRef(execution).End != nil
			}
			return err
		})
		return err == nil && ended
	}
}
