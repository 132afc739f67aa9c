package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/protocol"
)

// Transport is what a binding gives the connection core: framing only.
// ReadFrame is called from the reader goroutine only; WriteFrame and Flush
// from the writer goroutine only; Close from anywhere, possibly more than
// once (only the first call counts).
type Transport interface {
	// ReadFrame returns the next inbound frame. ErrFrameTooLarge means the
	// binding discarded an over-long frame and the connection continues
	// (NDJSON); any other error ends the connection.
	ReadFrame() ([]byte, error)
	// WriteFrame writes one outbound frame (it may buffer).
	WriteFrame(b []byte) error
	// Flush pushes buffered frames to the peer.
	Flush() error
	// Close ends the connection for reason.
	Close(reason CloseReason) error
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

// request is one admitted request. Its pointer identity is the ownership
// token: cleanup deletes reqs[key] only while it still points here.
type request struct {
	key    protocol.Key
	cancel context.CancelFunc
	// registered: the entry is in Conn.reqs under key (classified frames).
	registered bool
	// subscribe: a subscription establishment ($/cancelRequest ignores it).
	subscribe bool
	// cancelled: $/cancelRequest released id and slot; the goroutine, when
	// it returns, only decrements cancelledRunning and drops its result.
	cancelled bool
}

// subscription is one live subscription; pointer identity is ownership.
type subscription struct {
	id     string
	cancel context.CancelFunc
}

// Conn is the transport-neutral connection core: one reader goroutine,
// one writer goroutine, one request table and one subscription table under
// one mutex. Invariants (all under mu):
//   - reqs holds exactly the admitted, not yet answered or cancelled
//     requests with a classified id; an id in reqs is "in flight".
//   - tasks counts slots: admitted requests not yet cancelled or answered
//     plus live subscriptions; tasks <= protocol.MaxConnectionTasks.
//   - cancelledRunning counts goroutines of cancelled requests that have
//     not returned yet.
//   - an entry is removed only by a party holding its pointer, after
//     checking the map still holds that pointer.
type Conn struct {
	disp  *Dispatcher
	t     Transport
	ident identity.ConnectionIdentity
	opts  Options

	ctx    context.Context // request and subscription contexts derive from it
	cancel context.CancelFunc

	mu               sync.Mutex
	reqs             map[protocol.Key]*request
	subs             map[string]*subscription
	tasks            int
	cancelledRunning int
	cancelledFreed   chan struct{} // signalled when cancelledRunning drops
	draining         bool          // no new admissions
	closeOnce        sync.Once
	closeReason      CloseReason
	endOnce          sync.Once
	done             chan struct{} // closed when the close sequence has run

	wg  sync.WaitGroup // request and subscription goroutines
	out *outbox
	// writeStart is the start (UnixNano) of the write in progress, 0 when
	// none; the process-wide watchdog cuts off a write older than
	// WriteTimeout.
	writeStart atomic.Int64
	stallOnce  atomic.Bool
}

// NewConn prepares a connection core over t for a peer with identity id.
func NewConn(d *Dispatcher, t Transport, id identity.ConnectionIdentity, opts Options) *Conn {
	opts.defaults()
	c := &Conn{
		disp:           d,
		t:              t,
		ident:          id,
		opts:           opts,
		reqs:           make(map[protocol.Key]*request),
		subs:           make(map[string]*subscription),
		cancelledFreed: make(chan struct{}, 1),
		out:            newOutbox(),
		done:           make(chan struct{}),
	}

	c.ctx, c.cancel = context.WithCancel(identity.With(context.Background(), id))
	return c
}

// Serve runs the connection until the peer goes away, the identity
// expires, or shutdown is cancelled (then in-flight requests get the grace
// period and the connection closes with CloseGoingAway). It returns after
// every goroutine it started has finished, except handlers that ignore
// cancellation (they are abandoned, their results dropped).
func (c *Conn) Serve(shutdown context.Context) {
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

// end runs the close sequence once; concurrent callers wait for it. On
// expiry or a broken connection nothing more reaches the backend or the
// peer; otherwise in-flight requests get the grace period and their
// answers are written before the transport closes.
func (c *Conn) end(reason CloseReason) {
	c.endOnce.Do(func() {
		defer close(c.done)
		if reason == CloseExpired || reason == CloseInternal {
			c.mu.Lock()
			c.draining = true
			c.mu.Unlock()
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
		c.mu.Lock()
		for id, s := range c.subs {
			delete(c.subs, id)
			s.cancel()
		}
		c.mu.Unlock()
	})
}

func (c *Conn) close(reason CloseReason) {
	c.closeOnce.Do(func() {
		c.closeReason = reason
		if err := c.t.Close(reason); err != nil {
			c.opts.Log.Debug("transport close", "err", err)
		}
	})
}

// drain stops admissions, ends every subscription, lets in-flight requests
// finish within the grace period and then cancels the rest.
func (c *Conn) drain() {
	c.mu.Lock()
	c.draining = true
	for id, s := range c.subs {
		delete(c.subs, id)
		s.cancel()
	}
	c.mu.Unlock()
	if !c.waitTasks(c.opts.ShutdownGrace) {
		c.cancel()
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
		c.mu.Lock()
		stopped := c.draining
		c.mu.Unlock()
		if stopped {
			return false
		}
		if !c.handleFrame(data) {
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
		c.mu.Lock()
		free := c.tasks < protocol.MaxConnectionTasks
		c.mu.Unlock()
		if !free {
			return true
		}
	}
	// The reader never writes to the peer itself: a peer that stops
	// reading must not stall the processing of its cancels. Its answers go
	// to the queue and a drainer writes them.
	start, full := c.out.pushInline(frame)
	if full {
		c.opts.Log.Warn("peer is not reading; closing connection")
		c.close(CloseStalled)
		c.out.abort()
		c.cancel()
		go c.end(CloseInternal)
		return false
	}
	if start {
		go c.drainer()
	}
	return true
}

// handleFrame applies the admission rules to one frame (spec/01 §1.1
// steps 2–8). It runs on the reader goroutine only; it returns false when
// the connection must end.
func (c *Conn) handleFrame(data []byte) bool {
	f := protocol.DecodeFrame(data)
	switch f.Kind {
	case protocol.FrameParseError:
		return c.inline(protocol.ParseErrorFrame, true)
	case protocol.FrameCancelRequest:
		c.cancelRequest(f.CancelID)
		return true
	case protocol.FrameSubscriptionCancel:
		c.cancelSubscription(f.SubscriptionID)
		return true
	}

	// Wait while too many cancelled handlers are still running.
	for {
		c.mu.Lock()
		n := c.cancelledRunning
		c.mu.Unlock()
		if n < MaxCancelledRunning {
			break
		}
		select {
		case <-c.cancelledFreed:
		case <-c.ctx.Done():
			return false
		}
	}

	c.mu.Lock()
	if c.draining {
		// Checked under the lock that also guards wg.Add below, so no
		// request is admitted once the close sequence waits for tasks.
		c.mu.Unlock()
		return false
	}
	if f.AdmissionID != nil {
		if _, dup := c.reqs[f.AdmissionID.Key()]; dup {
			c.mu.Unlock()
			return c.inline(protocol.DuplicateIDFrame(*f.AdmissionID), false)
		}
	}
	if c.tasks >= protocol.MaxConnectionTasks {
		c.mu.Unlock()
		if f.AdmissionID != nil {
			return c.inline(protocol.ServerBusyFrame(*f.AdmissionID), false)
		}
		return true
	}
	if f.Kind == protocol.FrameInvalid {
		c.mu.Unlock()
		return c.inline(protocol.InvalidRequestFrame, false)
	}
	m, known := protocol.LookupMethod(f.Method)
	if !known || (m.Kind == protocol.Subscription && f.AdmissionID == nil) {
		c.mu.Unlock()
		return c.inline(protocol.MethodNotFoundFrame(f.ID), false)
	}
	if m.Kind == protocol.Unary && c.disp.Inline(m.Name) {
		// A read-only snapshot answered in place: it completes before the
		// next frame is read, so no other frame can observe its id in
		// flight, and its answer is queued like the reader's own.
		c.mu.Unlock()
		return c.inline(c.disp.Unary(c.ctx, m, f.ID, f.Params), false)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	r := &request{key: f.ID.Key(), cancel: cancel, subscribe: m.Kind == protocol.Subscription}
	if f.AdmissionID != nil {
		r.registered = true
		c.reqs[r.key] = r
	}
	c.tasks++
	c.wg.Add(1)
	c.mu.Unlock()

	if m.Kind == protocol.Subscription {
		go c.runSubscription(ctx, r, m, f)
	} else {
		go c.runUnary(ctx, r, m, f)
	}
	return true
}

// cancelRequest handles $/cancelRequest on the reader goroutine: under the
// table lock it cancels the entry's context and frees its id and slot at
// once, so an immediate same-id retry is admitted deterministically.
func (c *Conn) cancelRequest(id protocol.ID) {
	c.mu.Lock()
	r, ok := c.reqs[id.Key()]
	if !ok || r.subscribe || r.cancelled {
		c.mu.Unlock()
		return
	}
	delete(c.reqs, r.key)
	r.cancelled = true
	c.tasks--
	c.cancelledRunning++
	c.mu.Unlock()
	r.cancel()
}

// cancelSubscription handles subscription/cancel: removal of that one
// subscription; unknown ids are a silent no-op.
func (c *Conn) cancelSubscription(id string) {
	c.mu.Lock()
	s, ok := c.subs[id]
	if ok {
		delete(c.subs, id)
	}
	c.mu.Unlock()
	if ok {
		s.cancel()
	}
}

// release ends request r's admission: it frees the id if r still owns it.
// It reports false when r was cancelled (its slot is already free and its
// result must be dropped).
func (c *Conn) release(r *request) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.cancelled {
		c.cancelledRunning--
		select {
		case c.cancelledFreed <- struct{}{}:
		default:
		}
		return false
	}
	if r.registered && c.reqs[r.key] == r {
		delete(c.reqs, r.key)
	}
	return true
}

func (c *Conn) freeSlot() {
	c.mu.Lock()
	c.tasks--
	c.mu.Unlock()
}

func (c *Conn) runUnary(ctx context.Context, r *request, m *protocol.MethodInfo, f protocol.Frame) {
	defer c.wg.Done()
	defer r.cancel()
	frame := c.disp.Unary(ctx, m, f.ID, f.Params)
	if !c.release(r) {
		return // cancelled: a late result is dropped
	}
	if frame == nil {
		c.freeSlot()
		return
	}
	c.answer(frame)
}

// answer delivers the final frame of a task and frees its slot before the
// peer can see the frame (so a client that keeps at most 256 requests
// outstanding never meets SERVER_BUSY): written in place by the write-role
// holder, or queued once a queue token is held — the slot bounds the
// goroutines waiting for room, so it is given up only then.
func (c *Conn) answer(frame []byte) {
	if c.out.tryDirect() {
		c.freeSlot()
		c.writeDirect(frame)
		return
	}
	start, freed, _ := c.out.pushThen(c.ctx, frame, c.freeSlot)
	if !freed {
		c.freeSlot()
	}
	if start {
		go c.drainer()
	}
}

func (c *Conn) runSubscription(ctx context.Context, r *request, m *protocol.MethodInfo, f protocol.Frame) {
	defer c.wg.Done()
	sub, errFrame := c.disp.Subscribe(ctx, m, f.ID, f.Params)
	c.release(r) // subscriptions ignore $/cancelRequest; the id is free now
	if sub == nil {
		r.cancel()
		if errFrame != nil {
			c.answer(errFrame)
		} else {
			c.freeSlot()
		}
		return
	}
	s := &subscription{id: sub.ID, cancel: r.cancel}
	c.mu.Lock()
	_, clash := c.subs[sub.ID]
	if !clash && !c.draining {
		c.subs[sub.ID] = s // registered before the response is queued
	}
	draining := c.draining
	c.mu.Unlock()
	if clash || draining {
		sub.Stream.Close()
		r.cancel()
		if clash {
			c.opts.Log.Error("backend minted a duplicate subscription id", "method", m.Name)
			c.answer(protocol.ErrorFrame(f.ID, protocol.Internal("")))
		} else {
			c.freeSlot()
		}
		return
	}
	defer func() {
		sub.Stream.Close()
		r.cancel()
		c.mu.Lock()
		if c.subs[s.id] == s {
			delete(c.subs, s.id)
		}
		c.tasks--
		c.mu.Unlock()
	}()

	result, err := protocol.Marshal(sub.Result)
	if err != nil {
		_ = c.send(c.ctx, protocol.ErrorFrame(f.ID, protocol.Internal("")))
		return
	}
	if c.send(ctx, protocol.ResultFrame(f.ID, result)) != nil {
		return
	}
	prefix := append([]byte(`{"jsonrpc":"2.0","method":"event","params":{"subscriptionId":`), protocol.AppendString(nil, sub.ID)...)
	var last string
	for {
		n, err := sub.Stream.Next(ctx)
		if err != nil || ctx.Err() != nil {
			return
		}
		if n.Closed != "" {
			params := protocol.AppendString([]byte(`{"subscriptionId":`), sub.ID)
			params = append(params, `,"reason":`...)
			params = protocol.AppendString(params, n.Closed)
			if sub.TrackCursor && last != "" {
				params = append(params, `,"lastDeliveredCursor":`...)
				params = protocol.AppendString(params, last)
			}
			params = append(params, '}')
			_ = c.send(ctx, protocol.NotificationFrame(protocol.NotifySubscriptionClosed, params))
			return
		}
		// params = {"subscriptionId":..<Rest>}; frame = prefix + Rest + "}}".
		if sub.MaxEventBytes > 0 && len(prefix)-len(`{"jsonrpc":"2.0","method":"event","params":`)+len(n.Rest)+1 > sub.MaxEventBytes {
			return // unencodable within bounds: end this subscription silently
		}
		frame := make([]byte, 0, len(prefix)+len(n.Rest)+2)
		frame = append(frame, prefix...)
		frame = append(frame, n.Rest...)
		frame = append(frame, '}', '}')
		if c.send(ctx, frame) != nil {
			return
		}
		if n.Cursor != "" {
			last = n.Cursor
		}
	}
}

// writeDirect writes one frame while holding the write role, then hands
// the role to a drainer if frames were queued meanwhile.
func (c *Conn) writeDirect(b []byte) {
	c.beginWrite()
	err := c.t.WriteFrame(b)
	if err == nil {
		err = c.t.Flush()
	}
	c.endWrite()
	if err != nil {
		c.writeFailed(err)
	}
	if c.out.release() {
		go c.drainer()
	}
}

// send delivers a frame from a request or subscription goroutine: written
// in place when the connection is idle, else queued (waiting for room
// while ctx lives).
func (c *Conn) send(ctx context.Context, b []byte) error {
	if c.out.tryDirect() {
		c.writeDirect(b)
		return nil
	}
	start, err := c.out.push(ctx, b)
	if start {
		go c.drainer()
	}
	return err
}

// InFlight reports the number of in-flight request ids and used slots
// (for tests and metrics).
func (c *Conn) InFlight() (ids, slots, cancelledRunning int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.reqs), c.tasks, c.cancelledRunning
}

// drainer holds the write role and writes queued frames in order,
// flushing once per batch, until the queue is empty; it exists only while
// there is something to drain.
func (c *Conn) drainer() {
	var batch []outFrame
	for {
		var ok bool
		batch, ok = c.out.next(batch[:0])
		if !ok {
			return
		}
		c.beginWrite()
		var err error
		for _, f := range batch {
			if err == nil && !c.out.isAborted() {
				err = c.t.WriteFrame(f.b)
			}
			if f.token {
				c.out.releaseToken()
			}
		}
		if err == nil {
			err = c.t.Flush()
		}
		c.endWrite()
		if err != nil {
			c.writeFailed(err)
		}
	}
}

// writeFailed ends a connection whose transport broke. The close
// sequence runs here too (not only when the reader returns), because a
// blocking stdin read may never return.
func (c *Conn) writeFailed(err error) {
	c.opts.Log.Debug("write failed", "err", err)
	c.out.abort()
	c.cancel()
	c.close(CloseInternal)
	go c.end(CloseInternal)
}
