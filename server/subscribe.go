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
	sub, errFrame := c.disp.Subscribe(ctx, m, f.ID, f.Params)
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
	var last string
	for {
		n, err := sub.Stream.Next(ctx)
		if err != nil || ctx.Err() != nil {
			return
		}
		if n.Closed != "" {
			if c.send(ctx, closedFrame(sub, n.Closed, last)) == nil && n.Closed == protocol.SlowConsumer && c.obs != nil {
				c.obs.SlowConsumer(mi)
			}
			return
		}
		// params = {"subscriptionId":..<Rest>}; frame = prefix + Rest + "}}".
		if sub.MaxEventBytes > 0 && len(prefix)-len(eventPrefix)+len(n.Rest)+1 > sub.MaxEventBytes {
			return // unencodable within bounds: end this subscription silently
		}
		frame := make([]byte, 0, len(prefix)+len(n.Rest)+2)
		frame = append(frame, prefix...)
		frame = append(frame, n.Rest...)
		frame = append(frame, '}', '}')
		if c.send(ctx, frame) != nil {
			return
		}
		if c.obs != nil {
			c.obs.Delivered(mi)
		}
		if n.Cursor != "" {
			last = n.Cursor
		}
	}
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
