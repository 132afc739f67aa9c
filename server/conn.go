package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/tracing"
)

// Transport is what a binding gives the connection core: framing only.
// Who calls what:
//   - ReadFrame: only the reader, the goroutine running Conn.Serve.
//   - WriteFrame and Flush: whichever goroutine holds the connection's
//     write role — a request, subscription or reader-queued frame's
//     producer writing in place, or a drainer. The role is exclusive and
//     handed over under a mutex, so these calls never overlap and each
//     happens after the previous one, though not on one goroutine: a
//     binding needs no lock between them. They may run concurrently with
//     ReadFrame and Close.
//   - Close: any goroutine, concurrently with the others, possibly more
//     than once (only the first call counts). It should make a blocked
//     ReadFrame or WriteFrame return where the medium allows.
type Transport interface {
	// ReadFrame returns the next inbound frame, valid until the next call
	// (the core copies what it keeps). ErrFrameTooLarge means the binding
	// discarded an over-long frame and the connection continues (NDJSON);
	// any other error ends the connection.
	ReadFrame() ([]byte, error)
	// WriteFrame writes one outbound frame (it may buffer).
	WriteFrame(b []byte) error
	// Flush pushes buffered frames to the peer.
	Flush() error
	// Close ends the connection for reason.
	Close(reason CloseReason) error
}

// NoWaitWriter is a Transport that can also write without ever waiting on
// the peer (a socket written with non-blocking writes). The reader then
// writes its own answers in place while the connection is idle, instead of
// handing each to a drainer goroutine, and holds them until it next waits
// for input, so the answers to frames that arrived together go out in one
// write.
type NoWaitWriter interface {
	Transport
	// WriteFrameHeld buffers one frame without pushing it to the peer.
	// Like WriteFrame it is called only by the write-role holder.
	WriteFrameHeld(b []byte) error
	// FlushNoWait pushes buffered frames as far as the peer takes them at
	// once; owed reports that the rest stays buffered: the next Flush must
	// push it (and may wait). Called only by the write-role holder.
	FlushNoWait() (owed bool, err error)
	// OnInputWait registers f before the connection is served; the
	// transport calls it before every read that may wait for the peer,
	// on whichever goroutine reads, so that no held answer waits behind
	// input that may depend on it. f never waits on the peer.
	OnInputWait(f func())
}

// CloseReason says why the core ends a connection; bindings map it to
// their own signal (a WebSocket close code, a stderr diagnostic).
type CloseReason int

const (
	// CloseNormal: the peer went away or the stream ended.
	CloseNormal CloseReason = iota
	// CloseGoingAway: the server is shutting down (WebSocket 1001).
	CloseGoingAway
	// CloseExpired: the connection identity expired (WebSocket 4401).
	CloseExpired
	// CloseStalled: the peer stopped reading (write deadline passed or
	// too many inline frames queued) (WebSocket 1008).
	CloseStalled
	// CloseInternal: the connection broke (WebSocket 1011).
	CloseInternal
)

// ErrFrameTooLarge is returned by ReadFrame for a discarded over-long frame
// on a binding where the connection survives it.
var ErrFrameTooLarge = errors.New("frame exceeds 1048576 bytes")

// Limits of the connection core beyond the protocol's own.
const (
	// MaxCancelledRunning bounds handler goroutines still running after
	// their request was cancelled: their id and slot are already free, so
	// they are counted separately. While the bound is reached the reader
	// waits for one to return before admitting another request, so a
	// connection never runs more than MaxCancelledRunning +
	// protocol.MaxConnectionTasks handler goroutines. Handlers that honour
	// ctx return promptly, so this only bites a backend that ignores
	// cancellation.
	MaxCancelledRunning = 256
	// MaxRunningSubmits bounds the run/submit handlers a connection runs
	// at once (see submitMethod). Admission is unchanged (a request takes
	// its id and slot when read); a submission admitted while
	// MaxRunningSubmits handlers run waits, in frame order and without a
	// goroutine, for one of them to return, and $/cancelRequest takes it
	// out of the queue. A peer that pipelines a deep batch of submissions
	// then costs the server a queue entry per waiting submission rather
	// than a goroutine and the stack its request's decoding grew.
	MaxRunningSubmits = 16
	// MaxInlineBacklog bounds frames the reader queued past the outbound
	// capacity (DUPLICATE_REQUEST_ID, SERVER_BUSY, parse errors): the
	// reader never blocks on the queue, and a peer that floods without
	// reading is cut off here.
	MaxInlineBacklog = 4096
)

// Options tune a connection. Zero values mean the defaults.
type Options struct {
	// ShutdownGrace is how long in-flight requests may run after the
	// stream ended or shutdown began (default 2s).
	ShutdownGrace time.Duration
	// WriteTimeout bounds one write to the peer (default 10s).
	WriteTimeout time.Duration
	// Now is the clock used for identity expiry (default time.Now).
	Now func() time.Time
	// Log receives connection diagnostics (default slog.Default()).
	Log *slog.Logger
	// Observer, when set, sees the connection (see observe.go); Binding
	// and Peer describe it to the observer.
	Observer Observer
	Binding  string
	Peer     string
	// Limits, when set, bound this connection's requests and
	// subscriptions (the transport obtained them from Limits.Open).
	Limits ConnLimits
	// Caller is the span the peer named when it connected (a traceparent
	// header); the spans of its requests are its children (trace.go).
	Caller tracing.SpanContext
}

func (o *Options) defaults() {
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 2 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Conn is the transport-neutral connection core. Its goroutines:
//   - the reader (the goroutine running Serve) reads and classifies every
//     frame in arrival order and applies cancels, admission and refusals
//     synchronously, so a later frame's answer proves an earlier cancel
//     was applied;
//   - one goroutine per admitted request or subscription, which calls the
//     backend and delivers its frames;
//   - at most one drainer at a time, which exists only while frames are
//     queued.
//
// Whoever produces a frame delivers it through the outbox: written in
// place when the connection is idle (the producer takes the write role),
// else queued for the role holder. The request table, the subscription
// table and the slot counts are one inFlight value changed only in
// updateInFlight.
type Conn struct {
	disp  *Dispatcher
	t     Transport
	nw    NoWaitWriter // t, when it can write without waiting; else nil
	ident identity.ConnectionIdentity
	opts  Options

	ctx    context.Context // request and subscription contexts derive from it
	cancel context.CancelFunc

	mu             sync.Mutex // guards inFlight; held only in updateInFlight
	inFlight       inFlight
	cancelledFreed chan struct{} // signalled when cancelledRunning drops
	closeOnce      sync.Once
	endOnce        sync.Once
	done           chan struct{} // closed when the close sequence has run

	wg  sync.WaitGroup // request and subscription goroutines
	out *outbox
	// hmu guards held: the reader holds the write role with frames
	// buffered in nw and not yet pushed (see writeHeld).
	hmu  sync.Mutex
	held bool
	// writeStart is the start (UnixNano) of the write in progress, 0 when
	// none; the process-wide watchdog cuts off a write older than
	// WriteTimeout.
	writeStart atomic.Int64
	stallOnce  atomic.Bool

	obs    ConnObserver // nil: not observed
	acct   *account     // the observed connection's account (conn_observe.go)
	reason CloseReason  // set by the close sequence
}

// NewConn prepares a connection core over t for a peer with identity id.
func NewConn(d *Dispatcher, t Transport, id identity.ConnectionIdentity, opts Options) *Conn {
	opts.defaults()
	c := &Conn{
		disp:  d,
		t:     t,
		ident: id,
		opts:  opts,
		inFlight: inFlight{
			reqs: make(map[protocol.Key]*request),
			subs: make(map[string]*subscription),
		},
		cancelledFreed: make(chan struct{}, 1),
		out:            newOutbox(),
		done:           make(chan struct{}),
	}

	if nw, ok := t.(NoWaitWriter); ok {
		c.nw = nw
		nw.OnInputWait(c.flushHeld)
	}
	c.ctx, c.cancel = context.WithCancel(tracing.WithRemote(identity.With(context.Background(), id), opts.Caller))
	return c
}

// Serve runs the connection until the peer goes away, the identity
// expires, or shutdown is cancelled (then in-flight requests get the grace
// period and the connection closes with CloseGoingAway). It returns after
// every goroutine it started has finished, except handlers that ignore
// cancellation (they are abandoned, their results dropped).
func (c *Conn) Serve(shutdown context.Context) {
	c.observeOpen()
	defer c.observeClose()
	watchdog.add(c)
	defer watchdog.remove(c)
	if !c.ident.ExpiresAt.IsZero() {
		expiry := time.AfterFunc(c.ident.ExpiresAt.Sub(c.opts.Now()), func() { c.end(CloseExpired) })
		defer expiry.Stop()
	}
	stop := context.AfterFunc(shutdown, func() { c.end(CloseGoingAway) })
	defer stop()
	// The calling goroutine is the reader.
	reason := CloseNormal
	if c.readLoop() {
		reason = CloseExpired
	} else if c.ctx.Err() != nil {
		reason = CloseInternal // a write failed or the peer stalled
	}
	c.end(reason)
	c.waitTasks(c.opts.ShutdownGrace)
}

// Done is closed when the connection has run its close sequence (the
// reader may still be returning from a read that cannot be interrupted).
func (c *Conn) Done() <-chan struct{} { return c.done }

// InFlight reports the number of in-flight request ids and used slots
// (for tests and metrics).
func (c *Conn) InFlight() (ids, slots, cancelledRunning int) {
	c.updateInFlight(func(s *inFlight) {
		ids, slots, cancelledRunning = len(s.reqs), s.tasks, s.cancelledRunning
	})
	return ids, slots, cancelledRunning
}

// end runs the close sequence once; concurrent callers wait for it. On
// expiry or a broken connection nothing more reaches the backend or the
// peer; otherwise in-flight requests get the grace period and their
// answers are written before the transport closes.
func (c *Conn) end(reason CloseReason) {
	c.endOnce.Do(func() {
		defer close(c.done)
		c.reason = reason
		if reason == CloseExpired || reason == CloseInternal {
			c.stopAdmitting()
			c.cancel()
			c.close(reason)
			c.out.abort()
		} else {
			c.drain()
			if !c.out.finish(c.opts.WriteTimeout) {
				c.out.abort()
			}
			c.close(reason)
		}
		c.cancel()
		c.dropQueued()
	})
}

// cutOff ends a connection that cannot go on (a broken transport, a
// stalled write, a peer that floods without reading): the transport closes
// with reason, queued frames are dropped, every handler is cancelled, and
// the close sequence runs here too, not only when the reader returns,
// because a blocking stdin read may never return.
func (c *Conn) cutOff(reason CloseReason) {
	c.close(reason)
	c.out.abort()
	c.cancel()
	go c.end(CloseInternal)
}

func (c *Conn) close(reason CloseReason) {
	c.closeOnce.Do(func() {
		if err := c.t.Close(reason); err != nil {
			c.opts.Log.Debug("transport close", "err", err)
		}
	})
}

// stopAdmitting starts draining (nothing is admitted or registered after
// it) and ends every subscription.
func (c *Conn) stopAdmitting() {
	var cancels []context.CancelFunc
	c.updateInFlight(func(s *inFlight) { cancels = s.stop() })
	for _, cancel := range cancels {
		cancel()
	}
}

// drain stops admissions, ends every subscription, lets in-flight requests
// finish within the grace period and then cancels the rest.
func (c *Conn) drain() {
	c.stopAdmitting()
	if !c.waitTasks(c.opts.ShutdownGrace) {
		c.cancel()
		c.dropQueued()
		c.waitTasks(c.opts.ShutdownGrace)
	}
}

// waitTasks waits up to d for every request/subscription goroutine.
func (c *Conn) waitTasks(d time.Duration) bool {
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// readLoop reads frames until the transport ends; it reports whether it
// stopped because the identity expired.
func (c *Conn) readLoop() (expired bool) {
	defer c.flushHeld()
	for {
		data, err := c.t.ReadFrame()
		if c.ident.ExpiredAt(c.opts.Now()) {
			return true
		}
		if errors.Is(err, ErrFrameTooLarge) {
			c.inline(protocol.ParseErrorFrame, false)
			continue
		}
		if err != nil {
			return false
		}
		c.countIn()
		var stopped bool
		c.updateInFlight(func(s *inFlight) { stopped = s.draining })
		if stopped || !c.handleFrame(data) {
			return false
		}
	}
}

// inline queues a reader-produced frame without blocking. slot says the
// frame needs a free task slot (else it is dropped, as the reference drops
// id-less malformed frames at saturation).
func (c *Conn) inline(frame []byte, slot bool) bool {
	if frame == nil {
		return true // an in-place answer cut short by the close sequence
	}
	if slot {
		free := false
		c.updateInFlight(func(s *inFlight) { free = s.tasks < protocol.MaxConnectionTasks })
		if !free {
			return true
		}
	}
	// The reader never waits on the peer: a peer that stops reading must
	// not stall the processing of its cancels. It writes an answer in
	// place only while the connection is idle and through a transport
	// that never waits; otherwise the answer is queued, in frame order,
	// for the write-role holder.
	if c.writeHeld(frame) {
		return true
	}
	start, full := c.out.pushInline(frame)
	if full {
		c.opts.Log.Warn("peer is not reading; closing connection")
		c.cutOff(CloseStalled)
		return false
	}
	if start {
		go c.drainer(false)
	}
	return true
}

// handleFrame applies the admission rules to one frame, in their
// observable order: parse error, cancel intercepts, duplicate id, task
// slot, envelope validity, method lookup, then in-place answer or task. It
// runs on the reader goroutine only; it returns false when the connection
// must end.
func (c *Conn) handleFrame(data []byte) bool {
	f := protocol.DecodeFrame(data)
	switch f.Kind {
	case protocol.FrameParseError:
		c.observeInline(MethodOther, CodeParseError)
		return c.inline(protocol.ParseErrorFrame, true)
	case protocol.FrameCancelRequest:
		c.cancelRequest(f.CancelID)
		return true
	case protocol.FrameSubscriptionCancel:
		c.cancelSubscription(f.SubscriptionID)
		return true
	}
	m, task := c.classify(&f)
	if c.opts.Limits != nil && f.Admitted && !c.opts.Limits.Allow() {
		return c.refuse(RefusedRate, protocol.ServerBusyFrame(f.AdmissionID))
	}
	var spec *request
	if task {
		spec = &request{key: f.ID.Key(), registered: f.Admitted, subscribe: m.Kind == protocol.Subscription}
	}
	var aid *protocol.ID
	if f.Admitted {
		aid = &f.AdmissionID
	}
	r, v := c.admit(aid, spec)
	switch v {
	case refusedClosing:
		return false
	case refusedDuplicate:
		return c.refuse(RefusedDuplicate, protocol.DuplicateIDFrame(f.AdmissionID))
	case refusedBusy:
		if f.Admitted {
			return c.refuse(RefusedBusy, protocol.ServerBusyFrame(f.AdmissionID))
		}
		return true
	}
	switch {
	case f.Kind == protocol.FrameInvalid:
		c.observeInline(MethodOther, CodeInvalidRequest)
		return c.inline(protocol.InvalidRequestFrame, false)
	case m == nil:
		c.observeInline(MethodOther, CodeMethodNotFound)
		return c.inline(protocol.MethodNotFoundFrame(f.ID), false)
	case r == nil:
		// A read-only snapshot answered in place: it completes before the
		// next frame is read, so no other frame can observe its id in
		// flight, and its answer is queued in frame order like the
		// reader's own.
		start := c.begin()
		ctx, span := c.traceRequest(c.ctx, m)
		frame := c.disp.Unary(ctx, m, f.ID, f.Params)
		traceAnswered(span, frame)
		c.answered(m, &f, frame, start)
		return c.inline(frame, false)
	}
	// The frame's bytes are the transport's until the next read.
	f.Params = bytes.Clone(f.Params)
	// Only the reader reads or sets r.cancel until the goroutine starts.
	ctx, cancel := context.WithCancel(c.ctx)
	r.cancel = cancel
	if r.subscribe {
		go c.runSubscription(ctx, r, m, f)
	} else if m != submitMethod {
		go c.runUnary(ctx, r, m, f)
	} else {
		u := &unaryCall{ctx: ctx, r: r, m: m, f: f}
		var where int
		c.updateInFlight(func(s *inFlight) { where = s.start(u) })
		switch where {
		case startRunner:
			go c.runUnaries(u)
		case startDropped:
			c.dropUnary(u)
		}
	}
	return true
}

// submitMethod is the one method whose requests a connection runs at most
// MaxRunningSubmits at once: a run/submit's handler waits only on the
// store, never on another request, so a submission that waits in the
// queue for an earlier one to commit adds no dependency between requests,
// and a pipelined deep batch of submissions is the load the bound is for.
// Every other request gets its handler goroutine when admitted, so that a
// long call never holds up another.
var submitMethod, _ = protocol.LookupMethod(protocol.MethodRunSubmit)

// classify says what a request frame becomes once admitted: m is its
// method (nil: answered with an envelope or method error), task whether it
// runs on its own goroutine (false: answered in place by the reader).
func (c *Conn) classify(f *protocol.Frame) (m *protocol.MethodInfo, task bool) {
	if f.Kind == protocol.FrameInvalid {
		return nil, false
	}
	m, known := protocol.LookupMethod(f.Method)
	if !known || (m.Kind == protocol.Subscription && !f.Admitted) {
		return nil, false
	}
	return m, m.Kind == protocol.Subscription || !c.disp.Inline(m.Name)
}

// admit runs the admission checks for a frame with admission id aid and
// starts accounting for the task spec describes (nil: answered in place).
// While too many cancelled handlers are still running it waits for one to
// return.
func (c *Conn) admit(aid *protocol.ID, spec *request) (r *request, v verdict) {
	for {
		c.updateInFlight(func(s *inFlight) {
			r, v = s.admit(aid, spec)
			if r != nil {
				// Under the lock that also guards draining, so no task
				// starts once the close sequence waits for tasks.
				c.wg.Add(1)
			}
		})
		if v != refusedCancelled {
			return r, v
		}
		c.flushHeld()
		select {
		case <-c.cancelledFreed:
		case <-c.ctx.Done():
			return nil, refusedClosing
		}
	}
}

// cancelRequest handles $/cancelRequest on the reader goroutine: it frees
// the request's id and slot at once, so an immediate same-id retry is
// admitted deterministically, and cancels its context.
func (c *Conn) cancelRequest(id protocol.ID) {
	var r *request
	var dequeued bool
	c.updateInFlight(func(s *inFlight) { r, dequeued = s.cancel(id.Key()) })
	if c.obs != nil {
		c.obs.Cancel(r != nil)
	}
	if r != nil {
		r.cancel()
	}
	if dequeued {
		c.wg.Done() // its handler will never run
	}
}

// cancelSubscription handles subscription/cancel: removal of that one
// subscription; unknown ids are a silent no-op.
func (c *Conn) cancelSubscription(id string) {
	var sub *subscription
	c.updateInFlight(func(s *inFlight) { sub = s.cancelSubscription(id) })
	if sub != nil {
		sub.cancel()
	}
}

// release ends request r's admission when its handler returns. It reports
// false when r was cancelled (its slot is already free and its result must
// be dropped).
func (c *Conn) release(r *request) bool {
	var owned bool
	c.updateInFlight(func(s *inFlight) { owned = s.release(r) })
	if !owned {
		select {
		case c.cancelledFreed <- struct{}{}:
		default:
		}
	}
	return owned
}

func (c *Conn) freeSlot() { c.updateInFlight((*inFlight).freeSlot) }

// runUnaries is a runner: it runs u's handler, then each queued call the
// in-flight state hands it, until none is queued. A call whose context
// ended while it was queued (the connection is closing) is ended without
// running its handler.
func (c *Conn) runUnaries(u *unaryCall) {
	for u != nil {
		if u.ctx.Err() != nil {
			c.dropUnary(u)
		} else {
			c.runUnary(u.ctx, u.r, u.m, u.f)
		}
		c.updateInFlight(func(s *inFlight) { u = s.next() })
	}
}

// dropUnary ends a queued call that will not run: its id and slot are
// freed and it is never answered.
func (c *Conn) dropUnary(u *unaryCall) {
	defer c.wg.Done()
	u.r.cancel()
	if c.release(u.r) {
		c.freeSlot()
	}
}

// dropQueued ends every queued call once the connection's context is
// cancelled, also when every runner is held by a handler that ignores it.
func (c *Conn) dropQueued() {
	var q []*unaryCall
	c.updateInFlight(func(s *inFlight) { q = s.takeQueue() })
	for _, u := range q {
		c.dropUnary(u)
	}
}

func (c *Conn) runUnary(ctx context.Context, r *request, m *protocol.MethodInfo, f protocol.Frame) {
	defer c.wg.Done()
	defer r.cancel()
	start := c.begin()
	ctx, span := c.traceRequest(ctx, m)
	frame := c.disp.Unary(ctx, m, f.ID, f.Params)
	traceAnswered(span, frame)
	c.answered(m, &f, frame, start)
	if !c.release(r) {
		return // cancelled: a late result is dropped
	}
	if frame == nil {
		c.freeSlot()
		return
	}
	c.answer(frame)
}
