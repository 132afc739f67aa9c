package server

import (
	"sync/atomic"
	"time"

	"github.com/oecp/oecp/protocol"
)

// The connection's side of observation and limits (observe.go). Every
// hook is a nil check when the host configured no observer or limits.

// account counts an observed connection's frames. The reader's count and
// the writers' are on separate cache lines, so that counting costs the
// reader and the write-role holder no cache-line traffic; an unobserved
// connection has no account and counts nothing.
type account struct {
	started time.Time
	in      int64 // frames read; the reader's only
	_       [56]byte
	out     atomic.Int64 // frames written
}

func (c *Conn) observeOpen() {
	if c.opts.Observer != nil {
		c.acct = &account{started: c.opts.Now()}
		c.obs = c.opts.Observer.Open(ConnInfo{Binding: c.opts.Binding, Peer: c.opts.Peer, Identity: c.ident})
	}
}

// countIn counts one frame read, on the reader.
func (c *Conn) countIn() {
	if c.acct != nil {
		c.acct.in++
	}
}

// observeClose reports the connection's account once Serve is done.
func (c *Conn) observeClose() {
	if c.obs != nil {
		c.obs.Closed(ConnStats{
			Duration: c.opts.Now().Sub(c.acct.started), FramesIn: c.acct.in, FramesOut: c.acct.out.Load(),
			Reason: c.reason,
		})
	}
}

// begin is the start of a request when the connection is observed (the
// zero time otherwise). Requests are timed around the dispatcher call,
// never by a wrapper around it: a task's goroutine starts on a small
// stack, and one more frame under the backend call can make every task
// grow it.
func (c *Conn) begin() time.Time {
	if c.obs == nil {
		return time.Time{}
	}
	return time.Now()
}

// answered reports a unary request answered with frame (nil: cancelled
// before it had an answer, not reported).
func (c *Conn) answered(m *protocol.MethodInfo, f *protocol.Frame, frame []byte, start time.Time) {
	if c.obs != nil && frame != nil {
		c.obs.Request(RequestInfo{Method: MethodIndex(m), Code: AnswerCode(frame), Duration: time.Since(start), Params: f.Params, Answer: frame})
	}
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

// established reports a subscription's establishment: sub, or the error
// answer errFrame (both nil: cancelled first, not reported).
func (c *Conn) established(m *protocol.MethodInfo, f *protocol.Frame, sub *Subscription, errFrame []byte, start time.Time) {
	if c.obs == nil || (sub == nil && errFrame == nil) {
		return
	}
	code := CodeOK
	if sub == nil {
		code = AnswerCode(errFrame)
	}
	c.obs.Request(RequestInfo{Method: MethodIndex(m), Code: code, Duration: time.Since(start), Params: f.Params, Answer: errFrame})
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
	if c.acct != nil {
		c.acct.out.Add(1)
	}
}
