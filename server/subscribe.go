package server

import (
	"context"
	"sync/atomic"

	"github.com/oecp/oecp/protocol"
)

// runSubscription establishes a subscription on its own goroutine and then
// streams it until the stream ends, the peer cancels it, or the connection
// closes. The slot taken at admission is held for the subscription's whole
// life. A subscription whose stream is a ParkingStream gives up its
// goroutine whenever it waits (see pump); the connection's handler count
// (c.wg) stays held until it ends.
func (c *Conn) runSubscription(ctx context.Context, r *request, m *protocol.MethodInfo, f protocol.Frame) {
	opened, handedOff := false, false
	defer func() {
		if handedOff {
			return // the pump's end releases both
		}
		if opened {
			c.closeSubscription()
		}
		c.wg.Done()
	}()
	if !c.openSubscription() {
		c.release(r)
		r.cancel()
		c.answer(protocol.ServerBusyFrame(f.ID))
		return
	}
	opened = true
	start := c.begin()
	sctx, span := c.traceRequest(ctx, m)
	sub, errFrame := c.disp.Subscribe(sctx, m, f.ID, f.Params)
	traceEstablished(span, sub, errFrame)
	c.established(m, &f, sub, errFrame, start)
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
	var clash, draining bool
	// Registered before the response is queued, so a subscription/cancel
	// sent right after the response finds it.
	c.updateInFlight(func(in *inFlight) { clash, draining = in.subscribe(s) })
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
	mi := c.subscribed(m)
	p := &pump{c: c, ctx: ctx, sub: sub, mi: mi}
	p.end = func() {
		sub.Stream.Close()
		r.cancel()
		c.updateInFlight(func(in *inFlight) {
			in.unsubscribe(s)
			in.freeSlot()
		})
		c.unsubscribed(mi)
		c.closeSubscription()
		c.wg.Done()
	}
	handedOff = true
	p.start(f.ID)
}

// A ParkingStream is a BatchStream that can wait for its next
// notification without holding its subscription's goroutine: a
// subscription that waits then costs the server no goroutine and no
// stack, only its own state.
type ParkingStream interface {
	BatchStream
	// PollBatch is NextBatch, except that when it has nothing ready it
	// may, instead of waiting, return no notification and no error after
	// arranging for wake to be called once it may have more. wake may be
	// called from any goroutine, before PollBatch returns, and more than
	// once (a wake-up with nothing new is harmless); the connection calls
	// PollBatch again after it.
	PollBatch(ctx context.Context, buf []Notification, max int, wake func()) ([]Notification, error)
}

// pump streams one established subscription. It writes the establishment
// result, then the stream's notifications in stream order, until the
// stream or ctx ends; a subscription/closed is the last frame. Its loop
// runs on the subscription's goroutine; with a ParkingStream that has
// nothing ready the loop returns instead of waiting, and the first wake-up
// (the stream's, or ctx ending) starts it again on a new goroutine. The
// state word ensures one loop at a time and that no wake-up is lost.
type pump struct {
	c      *Conn
	ctx    context.Context
	sub    *Subscription
	mi     int
	end    func()        // releases the subscription; run once, by the last loop
	ps     ParkingStream // the stream, when it can be woken; else nil
	wakeFn func()        // p.wake, made once (with ps)
	stop   func() bool   // stops ctx's call of wakeFn (with ps)
	prefix []byte
	last   string // the last cursor delivered
	batch  []Notification
	frames [][]byte
	state  atomic.Int32
}

// The states of pump.state.
const (
	pumping int32 = iota // a loop runs
	woken                // a loop runs, and a wake-up came since its last poll
	parked               // no loop runs; a wake-up starts one
	ended                // the subscription has ended
)

// start sends the establishment result and runs the loop on the calling
// goroutine.
func (p *pump) start(id protocol.ID) {
	result, err := protocol.Marshal(p.sub.Result)
	if err != nil {
		_ = p.c.send(p.c.ctx, protocol.ErrorFrame(id, protocol.Internal("")))
		p.finish()
		return
	}
	if p.c.send(p.ctx, protocol.ResultFrame(id, result)) != nil {
		p.finish()
		return
	}
	p.prefix = protocol.AppendString([]byte(eventPrefix+`{"subscriptionId":`), p.sub.ID)
	if ps, ok := p.sub.Stream.(ParkingStream); ok {
		p.ps, p.wakeFn = ps, p.wake
		p.stop = context.AfterFunc(p.ctx, p.wakeFn)
	}
	p.loop()
}

// wake starts a loop if none runs, or records the wake-up for the one
// that does.
func (p *pump) wake() {
	for {
		switch st := p.state.Load(); st {
		case parked:
			if p.state.CompareAndSwap(parked, pumping) {
				go p.loop()
				return
			}
		case pumping:
			if p.state.CompareAndSwap(pumping, woken) {
				return
			}
		default: // woken, ended
			return
		}
	}
}

// loop writes notifications until the subscription ends or, with a
// ParkingStream, until nothing is ready and no wake-up came since the
// poll that found nothing.
func (p *pump) loop() {
	for {
		// A wake-up recorded before this point is seen by the poll below.
		p.state.Store(pumping)
		batch, waiting, err := p.next()
		if err != nil || p.ctx.Err() != nil {
			p.finish()
			return
		}
		if waiting {
			// Nothing held between loops: a waiting subscription keeps
			// no batch and no frames.
			p.batch, p.frames = nil, nil
			if p.state.CompareAndSwap(pumping, parked) {
				return
			}
			continue // woken while polling
		}
		if !p.write(batch) {
			p.finish()
			return
		}
	}
}

// next reads the next batch: a poll that may find nothing (waiting) on a
// ParkingStream, else a blocking read.
func (p *pump) next() (batch []Notification, waiting bool, err error) {
	if p.ps != nil {
		p.batch, err = p.ps.PollBatch(p.ctx, p.batch[:0], maxEventBatch, p.wakeFn)
		return p.batch, err == nil && len(p.batch) == 0, err
	}
	p.batch, err = nextBatch(p.ctx, p.sub.Stream, p.batch[:0])
	return p.batch, false, err
}

// write sends batch's events and, after the last, its close; it reports
// whether the subscription goes on.
func (p *pump) write(batch []Notification) bool {
	c := p.c
	var cursor, closed string
	p.frames, cursor, closed = eventFrames(p.sub, p.prefix, batch, p.frames[:0])
	if len(p.frames) > 0 {
		if c.sendAll(p.ctx, p.frames) != nil {
			return false
		}
		if c.obs != nil {
			for range p.frames {
				c.obs.Delivered(p.mi)
			}
		}
		if cursor != "" {
			p.last = cursor
		}
	}
	if closed != "" {
		if c.send(p.ctx, closedFrame(p.sub, closed, p.last)) == nil && closed == protocol.SlowConsumer && c.obs != nil {
			c.obs.SlowConsumer(p.mi)
		}
		return false
	}
	// An event unencodable within bounds ends the subscription silently.
	return len(p.frames) == len(batch)
}

// finish ends the subscription: no wake-up starts a loop after it.
func (p *pump) finish() {
	p.state.Store(ended)
	if p.stop != nil {
		p.stop()
	}
	p.end()
}

// eventPrefix is the start of every event frame; the subscription id and
// the backend's pre-encoded members follow.
const eventPrefix = `{"jsonrpc":"2.0","method":"event","params":`

// BatchStream is a Stream that can also hand over, at once, several
// notifications it has ready, so that the connection writes them as one
// batch (one flush).
type BatchStream interface {
	Stream
	// NextBatch blocks like Next for the first notification, then appends
	// to buf, in stream order, those that are ready without waiting, at
	// most max in all. A Closed notification ends a batch.
	NextBatch(ctx context.Context, buf []Notification, max int) ([]Notification, error)
}

// maxEventBatch bounds the notifications a subscription writes in one
// batch.
const maxEventBatch = protocol.OutboundQueueCapacity

// batchFlushBytes: a batch written in place is flushed whenever this much
// has been written since the last flush, so a transport's write buffer
// stays small enough to be kept and reused rather than grown per batch.
const batchFlushBytes = 32 << 10

// nextBatch reads the next notifications of s: a batch when s can give
// one, else one.
func nextBatch(ctx context.Context, s Stream, buf []Notification) ([]Notification, error) {
	if bs, ok := s.(BatchStream); ok {
		return bs.NextBatch(ctx, buf, maxEventBatch)
	}
	n, err := s.Next(ctx)
	if err != nil {
		return buf, err
	}
	return append(buf, n), nil
}

// eventFrames appends to frames the event frames of batch, in one
// allocation, up to the first Closed notification (whose reason it
// returns) or the first event over sub's size bound; cursor is the last
// cursor among them.
func eventFrames(sub *Subscription, prefix []byte, batch []Notification, frames [][]byte) (_ [][]byte, cursor, closed string) {
	// params = {"subscriptionId":..<Rest>}; frame = prefix + Rest + "}}".
	size, end := 0, len(batch)
	for i, n := range batch {
		if n.Closed != "" {
			end, closed = i, n.Closed
			break
		}
		if sub.MaxEventBytes > 0 && len(prefix)-len(eventPrefix)+len(n.Rest)+1 > sub.MaxEventBytes {
			end = i
			break
		}
		size += len(prefix) + len(n.Rest) + 2
	}
	buf := make([]byte, 0, size)
	for _, n := range batch[:end] {
		start := len(buf)
		buf = append(buf, prefix...)
		buf = append(buf, n.Rest...)
		buf = append(buf, '}', '}')
		frames = append(frames, buf[start:len(buf):len(buf)])
		if n.Cursor != "" {
			cursor = n.Cursor
		}
	}
	return frames, cursor, closed
}

// sendAll delivers frames in order: written in place with one flush per
// batchFlushBytes when the connection is idle, else queued one by one
// like send.
func (c *Conn) sendAll(ctx context.Context, frames [][]byte) error {
	if len(frames) == 1 || !c.out.tryDirect() {
		for _, f := range frames {
			if err := c.send(ctx, f); err != nil {
				return err
			}
		}
		return nil
	}
	c.writeDirect(frames...)
	return nil
}

// closedFrame is the terminal subscription/closed notification; a
// cursor-tracking subscription names the last cursor it delivered.
func closedFrame(sub *Subscription, reason, last string) []byte {
	params := protocol.AppendString([]byte(`{"subscriptionId":`), sub.ID)
	params = append(params, `,"reason":`...)
	params = protocol.AppendString(params, reason)
	if sub.TrackCursor && last != "" {
		params = append(params, `,"lastDeliveredCursor":`...)
		params = protocol.AppendString(params, last)
	}
	params = append(params, '}')
	return protocol.NotificationFrame(protocol.NotifySubscriptionClosed, params)
}
