package server

import (
	"context"

	"github.com/oecp/oecp/protocol"
)

// runSubscription establishes a subscription on its own goroutine and then
// streams it until the stream ends, the peer cancels it, or the connection
// closes. The slot taken at admission is held for the subscription's whole
// life.
func (c *Conn) runSubscription(ctx context.Context, r *request, m *protocol.MethodInfo, f protocol.Frame) {
	defer c.wg.Done()
	if !c.openSubscription() {
		c.release(r)
		r.cancel()
		c.answer(protocol.ServerBusyFrame(f.ID))
		return
	}
	defer c.closeSubscription()
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
	defer func() {
		sub.Stream.Close()
		r.cancel()
		c.updateInFlight(func(in *inFlight) {
			in.unsubscribe(s)
			in.freeSlot()
		})
		c.unsubscribed(mi)
	}()
	c.stream(ctx, sub, f.ID, mi)
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

// stream writes the establishment result, then the subscription's
// notifications in stream order, until the stream or ctx ends; a
// subscription/closed is the last frame.
func (c *Conn) stream(ctx context.Context, sub *Subscription, id protocol.ID, mi int) {
	result, err := protocol.Marshal(sub.Result)
	if err != nil {
		_ = c.send(c.ctx, protocol.ErrorFrame(id, protocol.Internal("")))
		return
	}
	if c.send(ctx, protocol.ResultFrame(id, result)) != nil {
		return
	}
	prefix := protocol.AppendString([]byte(eventPrefix+`{"subscriptionId":`), sub.ID)
	var (
		last   string
		batch  []Notification
		frames [][]byte
	)
	for {
		batch, err = nextBatch(ctx, sub.Stream, batch[:0])
		if err != nil || ctx.Err() != nil {
			return
		}
		var cursor, closed string
		frames, cursor, closed = eventFrames(sub, prefix, batch, frames[:0])
		if len(frames) > 0 {
			if c.sendAll(ctx, frames) != nil {
				return
			}
			if c.obs != nil {
				for range frames {
					c.obs.Delivered(mi)
				}
			}
			if cursor != "" {
				last = cursor
			}
		}
		if closed != "" {
			if c.send(ctx, closedFrame(sub, closed, last)) == nil && closed == protocol.SlowConsumer && c.obs != nil {
				c.obs.SlowConsumer(mi)
			}
			return
		}
		if len(frames) < len(batch) {
			return // an event unencodable within bounds: end silently
		}
	}
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
