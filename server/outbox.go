package server

import (
	"context"
	"errors"
	"sync"

	"github.com/oecp/oecp/protocol"
)

// errOutboxClosed is returned by push once the connection is closing.
var errOutboxClosed = errors.New("connection is closing")

type outFrame struct {
	b     []byte
	token bool // holds one of the OutboundQueueCapacity slots
}

// outbox is the single outbound queue of a connection. Request and
// subscription goroutines push through a token bucket of
// protocol.OutboundQueueCapacity frames and block (with their context)
// when it is full; the reader pushes its inline answers without a token so
// that it never blocks, bounded by MaxInlineBacklog.
type outbox struct {
	tokens chan struct{}

	mu       sync.Mutex
	q        []outFrame
	inline   int
	finished bool
	// writing is the write role: exactly one goroutine at a time writes
	// to the transport — the writer goroutine draining the queue, or a
	// producer writing its own frame directly because the queue was empty
	// and nobody was writing (which saves a goroutine hand-off).
	writing bool

	wake      chan struct{}
	aborted   chan struct{}
	abortOnce sync.Once
}

func newOutbox() *outbox {
	return &outbox{
		tokens:  make(chan struct{}, protocol.OutboundQueueCapacity),
		wake:    make(chan struct{}, 1),
		aborted: make(chan struct{}),
	}
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// push queues b, waiting for room while ctx lives.
func (o *outbox) push(ctx context.Context, b []byte) error {
	select {
	case o.tokens <- struct{}{}: // fast path: room in the queue
	default:
		select {
		case o.tokens <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-o.aborted:
			return errOutboxClosed
		}
	}
	o.mu.Lock()
	if o.finished {
		o.mu.Unlock()
		<-o.tokens
		return errOutboxClosed
	}
	o.q = append(o.q, outFrame{b: b, token: true})
	o.mu.Unlock()
	o.signal()
	return nil
}

// pushInline queues b without blocking; false means the backlog bound was
// hit and the peer should be cut off.
func (o *outbox) pushInline(b []byte) bool {
	o.mu.Lock()
	if o.finished {
		o.mu.Unlock()
		return true
	}
	if o.inline >= MaxInlineBacklog {
		o.mu.Unlock()
		return false
	}
	o.inline++
	o.q = append(o.q, outFrame{b: b})
	o.mu.Unlock()
	o.signal()
	return true
}

// tryDirect takes the write role for a producer when the queue is empty
// and nobody writes; the caller then writes its frame and calls endWrite.
func (o *outbox) tryDirect() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case <-o.aborted:
		return false
	default:
	}
	if o.writing || o.finished || len(o.q) > 0 {
		return false
	}
	o.writing = true
	return true
}

// endWrite gives the write role back and wakes the writer goroutine if
// frames were queued meanwhile.
func (o *outbox) endWrite() {
	o.mu.Lock()
	o.writing = false
	pending := len(o.q) > 0
	o.mu.Unlock()
	if pending {
		o.signal()
	}
}

// take moves every queued frame into batch, waiting for at least one, and
// takes the write role (give it back with endWrite). It reports false when
// the writer should stop.
func (o *outbox) take(batch []outFrame) ([]outFrame, bool) {
	for {
		select {
		case <-o.aborted:
			return batch, false
		default:
		}
		o.mu.Lock()
		if len(o.q) > 0 && !o.writing {
			o.writing = true
			batch = append(batch, o.q...)
			clear(o.q)
			o.q = o.q[:0]
			for _, f := range batch {
				if !f.token {
					o.inline--
				}
			}
			o.mu.Unlock()
			return batch, true
		}
		fin := o.finished && len(o.q) == 0 && !o.writing
		o.mu.Unlock()
		if fin {
			return batch, false
		}
		select {
		case <-o.wake:
		case <-o.aborted:
		}
	}
}

// release returns the token of a written frame.
func (o *outbox) release() { <-o.tokens }

// finish lets the writer drain what is queued and stop.
func (o *outbox) finish() {
	o.mu.Lock()
	o.finished = true
	o.mu.Unlock()
	o.signal()
}

// abort drops everything queued and stops the writer now.
func (o *outbox) abort() {
	o.abortOnce.Do(func() { close(o.aborted) })
}
