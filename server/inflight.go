package server

import (
	"context"
	"slices"

	"github.com/oecp/oecp/protocol"
)

// request is one admitted request. Its pointer identity is the ownership
// token: only the party holding it may remove reqs[key], and only while
// the map still points here.
type request struct {
	key    protocol.Key
	cancel context.CancelFunc
	// registered: the entry is in reqs under key (classified frames).
	registered bool
	// subscribe: a subscription establishment ($/cancelRequest ignores it).
	subscribe bool
	// cancelled: $/cancelRequest released id and slot; the goroutine, when
	// it returns, only decrements cancelledRunning and drops its result.
	cancelled bool
}

// unaryCall is an admitted unary request with what its handler needs.
type unaryCall struct {
	ctx context.Context
	r   *request
	m   *protocol.MethodInfo
	f   protocol.Frame
}

// subscription is one live subscription; pointer identity is ownership.
type subscription struct {
	id     string
	cancel context.CancelFunc
}

// inFlight is everything a connection has admitted and not yet let go.
// It is accessed only in Conn.updateInFlight, so each change below is one
// critical section. Invariants:
//   - reqs holds exactly the admitted requests with a classified id that
//     are neither answered nor cancelled; an id in reqs is "in flight".
//   - tasks counts slots: admitted requests not yet cancelled or answered
//     plus live subscriptions; tasks <= protocol.MaxConnectionTasks.
//   - cancelledRunning counts goroutines of cancelled requests that have
//     not returned yet; while it is at MaxCancelledRunning nothing more is
//     admitted.
//   - an entry is removed only by a party holding its pointer, after
//     checking the map still holds that pointer.
//   - once draining is set nothing is admitted or registered again.
//   - running counts the goroutines running unary handlers (runners),
//     running <= MaxRunningSubmits; queue holds, in frame order, the
//     admitted unary requests no runner has started, and is empty while
//     running < MaxRunningSubmits.
type inFlight struct {
	reqs             map[protocol.Key]*request
	subs             map[string]*subscription
	tasks            int
	cancelledRunning int
	draining         bool
	running          int
	queue            []*unaryCall
}

// verdict is the outcome of admit.
type verdict int

const (
	admitted verdict = iota
	// refusedClosing: the close sequence has started; the reader stops.
	refusedClosing
	// refusedCancelled: too many cancelled handlers still run; the reader
	// waits for one to return and asks again.
	refusedCancelled
	// refusedDuplicate: the admission id is in flight.
	refusedDuplicate
	// refusedBusy: every task slot is taken.
	refusedBusy
)

// admit applies the admission checks, in their observable order, to a
// frame with admission id aid (nil: none). task describes the task the
// frame becomes, or is nil when the frame is answered in place; an
// admitted task is returned as a new request that holds a slot and, when
// registered, its id.
func (s *inFlight) admit(aid *protocol.ID, task *request) (*request, verdict) {
	switch {
	case s.draining:
		return nil, refusedClosing
	case s.cancelledRunning >= MaxCancelledRunning:
		return nil, refusedCancelled
	}
	if aid != nil {
		if _, dup := s.reqs[aid.Key()]; dup {
			return nil, refusedDuplicate
		}
	}
	if s.tasks >= protocol.MaxConnectionTasks {
		return nil, refusedBusy
	}
	if task == nil {
		return nil, admitted
	}
	r := new(request)
	*r = *task
	if r.registered {
		s.reqs[r.key] = r
	}
	s.tasks++
	return r, admitted
}

// cancel handles $/cancelRequest: it frees the id and slot of the unary
// request in flight under key at once, so an immediate same-id retry is
// admitted, and returns it for the caller to cancel (nil: nothing to do).
// A request still queued leaves the queue: no handler will run for it,
// and dequeued says so (the caller ends its task).
func (s *inFlight) cancel(key protocol.Key) (r *request, dequeued bool) {
	r, ok := s.reqs[key]
	if !ok || r.subscribe || r.cancelled {
		return nil, false
	}
	delete(s.reqs, key)
	r.cancelled = true
	s.tasks--
	if i := slices.IndexFunc(s.queue, func(u *unaryCall) bool { return u.r == r }); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
		return r, true
	}
	s.cancelledRunning++
	return r, false
}

// Where start puts a unary call.
const (
	startRunner  = iota // the caller starts a runner for it
	startQueued         // it waits in the queue for a runner
	startDropped        // its context has ended: the caller ends it unrun
)

// start decides who runs the admitted unary call u: a new runner while
// fewer than MaxRunningSubmits run, else the queue. A call whose context
// has already ended is not queued: the close sequence cancels the
// connection's context before it empties the queue, so a call queued
// after that would wait for a runner that may never come.
func (s *inFlight) start(u *unaryCall) int {
	switch {
	case s.running < MaxRunningSubmits:
		s.running++
		return startRunner
	case u.ctx.Err() != nil:
		return startDropped
	}
	s.queue = append(s.queue, u)
	return startQueued
}

// next hands a runner whose handler returned the first queued call, or
// ends the runner (nil) when none is queued.
func (s *inFlight) next() *unaryCall {
	if len(s.queue) == 0 {
		s.running--
		return nil
	}
	u := s.queue[0]
	s.queue[0] = nil
	s.queue = s.queue[1:]
	return u
}

// takeQueue empties the queue and returns the calls it held, for the
// close sequence to end without running them; each still owns its id
// and slot.
func (s *inFlight) takeQueue() []*unaryCall {
	q := s.queue
	s.queue = nil
	return q
}

// release ends r's admission when its handler returns: it frees the id if
// r still owns it. It reports false when r was cancelled (its slot is
// already free and its result must be dropped).
func (s *inFlight) release(r *request) bool {
	if r.cancelled {
		s.cancelledRunning--
		return false
	}
	if r.registered && s.reqs[r.key] == r {
		delete(s.reqs, r.key)
	}
	return true
}

// freeSlot gives back the slot of a task that has delivered its answer.
func (s *inFlight) freeSlot() { s.tasks-- }

// subscribe registers a live subscription under its backend-minted id. It
// refuses (and registers nothing) on an id clash or once draining.
func (s *inFlight) subscribe(sub *subscription) (clash, draining bool) {
	if _, clash = s.subs[sub.id]; !clash && !s.draining {
		s.subs[sub.id] = sub
	}
	return clash, s.draining
}

// unsubscribe removes sub if it still owns its id (subscription/cancel or
// the close sequence may have removed it already).
func (s *inFlight) unsubscribe(sub *subscription) {
	if s.subs[sub.id] == sub {
		delete(s.subs, sub.id)
	}
}

// cancelSubscription handles subscription/cancel: it removes the live
// subscription id and returns it for the caller to cancel (nil: unknown
// id, a silent no-op).
func (s *inFlight) cancelSubscription(id string) *subscription {
	sub, ok := s.subs[id]
	if !ok {
		return nil
	}
	delete(s.subs, id)
	return sub
}

// stop starts draining and removes every subscription, returning their
// cancel functions for the caller to run outside the lock.
func (s *inFlight) stop() []context.CancelFunc {
	s.draining = true
	cancels := make([]context.CancelFunc, 0, len(s.subs))
	for id, sub := range s.subs {
		delete(s.subs, id)
		cancels = append(cancels, sub.cancel)
	}
	return cancels
}

// updateInFlight runs f on the connection's in-flight state under c.mu.
// It is the only place that state is read or changed; f must not block,
// call the transport, or take another lock except a context's own.
func (c *Conn) updateInFlight(f func(*inFlight)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.inFlight)
}
