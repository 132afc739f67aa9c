package server

import (
	"context"
	"time"

	"github.com/oecp/oecp/protocol"
)

// The connection's side of observation and limits (observe.go). Every
// hook is a nil check when the host configured no observer or limits.

func (c *Conn) observeOpen() {
	c.started = c.opts.Now()
	if c.opts.Observer != nil {
		c.obs = c.opts.Observer.Open(ConnInfo{Binding: c.opts.Binding, Peer: c.opts.Peer, Identity: c.ident})
	}
}

// observeClose reports the connection's account once Serve is done.
func (c *Conn) observeClose() {
	if c.obs != nil {
		c.obs.Closed(ConnStats{
			Duration: c.opts.Now().Sub(c.started), FramesIn: c.framesIn, FramesOut: c.framesOut.Load(),
			Reason: c.reason,
		})
	}
}

// unary serves one unary request, timed and observed when observed; a
// request cancelled before it had an answer is not reported.
func (c *Conn) unary(ctx context.Context, m *protocol.MethodInfo, f *protocol.Frame) []byte {
	if c.obs == nil {
		return c.disp.Unary(ctx, m, f.ID, f.Params)
	}
	start := time.Now()
	frame := c.disp.Unary(ctx, m, f.ID, f.Params)
	if frame != nil {
		c.obs.Request(RequestInfo{Method: MethodIndex(m), Code: AnswerCode(frame), Duration: time.Since(start), Params: f.Params, Answer: frame})
	}
	return frame
}

// observeInline reports a request the reader answers itself with an
// envelope error.
func (c *Conn) observeInline(method int, code Code) {
	if c.obs != nil {
		c.obs.Request(RequestInfo{Method: method, Code: code})
	}
}

// refuse answers a request that admission refused.
func (c *Conn) refuse(r Refusal, frame []byte) bool {
	if c.obs != nil {
		c.obs.Refused(r)
	}
	return c.inline(frame, false)
}

// openSubscription reserves one of the tenant's subscriptions before the
// backend is asked for it.
func (c *Conn) openSubscription() bool {
	if c.opts.Limits == nil || c.opts.Limits.OpenSubscription() {
		return true
	}
	if c.obs != nil {
		c.obs.Refused(RefusedSubscriptions)
	}
	return false
}

func (c *Conn) closeSubscription() {
	if c.opts.Limits != nil {
		c.opts.Limits.CloseSubscription()
	}
}

// subscribe establishes a subscription, timed and observed when observed.
func (c *Conn) subscribe(ctx context.Context, m *protocol.MethodInfo, f *protocol.Frame) (*Subscription, []byte) {
	if c.obs == nil {
		return c.disp.Subscribe(ctx, m, f.ID, f.Params)
	}
	start := time.Now()
	sub, errFrame := c.disp.Subscribe(ctx, m, f.ID, f.Params)
	if sub != nil || errFrame != nil {
		code := CodeOK
		if sub == nil {
			code = AnswerCode(errFrame)
		}
		c.obs.Request(RequestInfo{Method: MethodIndex(m), Code: code, Duration: time.Since(start), Params: f.Params, Answer: errFrame})
	}
	return sub, errFrame
}

// subscribed reports a live subscription and returns its method index.
func (c *Conn) subscribed(m *protocol.MethodInfo) int {
	mi := MethodIndex(m)
	if c.obs != nil {
		c.obs.Subscribed(mi)
	}
	return mi
}

func (c *Conn) unsubscribed(mi int) {
	if c.obs != nil {
		c.obs.Unsubscribed(mi)
	}
}

// countOut counts one frame written, for the connection's account.
func (c *Conn) countOut() {
	if c.obs != nil {
		c.framesOut.Add(1)
	}
}
