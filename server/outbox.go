package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/oecp/oecp/protocol"
)

// errOutboxClosed is returned by push once the connection is closing.
var errOutboxClosed = errors.New("connection is closing")

type outFrame struct {
	b     []byte
	token bool // holds one of the OutboundQueueCapacity slots
}

// outbox is the outbound side of a connection: a bounded queue and the
// write role. Exactly one goroutine at a time holds the role and writes to
// the transport:
//
//   - a producer whose frame finds the connection idle (empty queue, no
//     holder) writes it in place (tryDirect), saving a hand-off;
//   - otherwise the frame is queued, and the queue is drained by a writer
//     goroutine that exists only while there is something to drain.
//
// Invariant (under mu): the queue is non-empty only while the role is
// held, so a queued frame always has someone responsible for writing it.
// Request and subscription goroutines queue through a token bucket of
// protocol.OutboundQueueCapacity frames and wait (with their context) when
// it is full; the reader queues its own answers without a token, so it
// never blocks, bounded by MaxInlineBacklog.
type outbox struct {
	tokens chan struct{}

	mu       sync.Mutex
	idle     *sync.Cond // broadcast when the role is released or on abort
	q        []outFrame
	inline   int
	finished bool
	writing  bool

	aborted   chan struct{}
	abortOnce sync.Once
}

func newOutbox() *outbox {
	o := &outbox{
		tokens:  make(chan struct{}, protocol.OutboundQueueCapacity),
		aborted: make(chan struct{}),
	}
	o.idle = sync.NewCond(&o.mu)
	return o
}

func (o *outbox) isAborted() bool {
	select {
	case <-o.aborted:
		return true
	default:
		return false
	}
}

// tryDirect takes the write role for a producer when the connection is
// idle; the caller writes its frame and then calls release.
func (o *outbox) tryDirect() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.writing || o.finished || o.isAborted() {
		return false
	}
	o.writing = true
	return true
}

// enqueue appends f; it reports whether the caller must start a drainer
// (nobody held the role).
func (o *outbox) enqueue(f outFrame) (startDrainer bool) {
	o.q = append(o.q, f)
	if !f.token {
		o.inline++
	}
	if !o.writing {
		o.writing = true
		return true
	}
	return false
}

// pushThen is push with a hook run once a queue token is held and before
// the frame is queued (outside the lock); ran says whether it ran.
func (o *outbox) pushThen(ctx context.Context, b []byte, then func()) (startDrainer, ran bool, err error) {
	select {
	case o.tokens <- struct{}{}:
	default:
		select {
		case o.tokens <- struct{}{}:
		case <-ctx.Done():
			return false, false, ctx.Err()
		case <-o.aborted:
			return false, false, errOutboxClosed
		}
	}
	then()
	o.mu.Lock()
	if o.finished || o.isAborted() {
		o.mu.Unlock()
		<-o.tokens
		return false, true, errOutboxClosed
	}
	start := o.enqueue(outFrame{b: b, token: true})
	o.mu.Unlock()
	return start, true, nil
}

// push queues b, waiting for room while ctx lives.
func (o *outbox) push(ctx context.Context, b []byte) (startDrainer bool, err error) {
	start, _, err := o.pushThen(ctx, b, func() {})
	return start, err
}

// pushInline queues b without blocking. full reports that the backlog
// bound was hit and the peer should be cut off.
func (o *outbox) pushInline(b []byte) (startDrainer, full bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.finished || o.isAborted() {
		return false, false
	}
	if o.inline >= MaxInlineBacklog {
		return false, true
	}
	return o.enqueue(outFrame{b: b}), false
}

// next hands the role holder the queued frames; when there are none it
// releases the role and reports false.
func (o *outbox) next(batch []outFrame) ([]outFrame, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.q) == 0 || o.isAborted() {
		o.writing = false
		o.idle.Broadcast()
		return batch, false
	}
	batch = append(batch, o.q...)
	clear(o.q)
	o.q = o.q[:0]
	for _, f := range batch {
		if !f.token {
			o.inline--
		}
	}
	return batch, true
}

// release gives the role back after a direct write; it reports whether
// frames were queued meanwhile, in which case the role is kept and the
// caller must start a drainer.
func (o *outbox) release() (startDrainer bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.q) > 0 && !o.isAborted() {
		return true
	}
	o.writing = false
	o.idle.Broadcast()
	return false
}

// releaseToken returns the token of a written frame.
func (o *outbox) releaseToken() { <-o.tokens }

// finish refuses new frames and waits up to d for the queue to drain and
// the role to be released; it reports whether it did.
func (o *outbox) finish(d time.Duration) bool {
	o.mu.Lock()
	o.finished = true
	o.mu.Unlock()
	expired := false
	t := time.AfterFunc(d, func() {
		o.mu.Lock()
		expired = true
		o.idle.Broadcast()
		o.mu.Unlock()
	})
	defer t.Stop()
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.writing && !expired && !o.isAborted() {
		o.idle.Wait()
	}
	return !o.writing
}

// abort drops everything queued; the role holder stops at its next step.
// Tokens of dropped frames are not returned: nothing can queue after an
// abort (push selects on aborted and re-checks under the lock).
func (o *outbox) abort() {
	o.abortOnce.Do(func() {
		close(o.aborted)
		o.mu.Lock()
		clear(o.q)
		o.q = o.q[:0]
		o.inline = 0
		o.idle.Broadcast()
		o.mu.Unlock()
	})
}
