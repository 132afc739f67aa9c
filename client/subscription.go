package client

import (
	"encoding/json"
	"fmt"
)

// Subscription is a live subscription (watch, logs, agent/attach). Events
// arrive on Events in server order; the channel is closed when the
// subscription ends, after which Err says why. Close it when done: it sends
// subscription/cancel.
type Subscription[T any] struct {
	// ID is the server's subscription id.
	ID string

	c      *Conn
	ch     chan T
	decode func(json.RawMessage) (T, string, error)
	// Guarded by c.mu:
	ended      bool
	err        error
	lastCursor string // cursor of the last event queued on ch
}

func newSubscription[T any](c *Conn, id string, decode func(json.RawMessage) (T, string, error)) *Subscription[T] {
	return &Subscription[T]{ID: id, c: c, ch: make(chan T, c.sbuf), decode: decode}
}

// Events delivers the subscription's events. It is closed when the
// subscription ends.
func (s *Subscription[T]) Events() <-chan T { return s.ch }

// Err reports why the subscription ended: nil after Close, a *ClosedError
// when the server closed it (or the consumer fell behind), or the
// connection's error. It is nil while the subscription is live.
func (s *Subscription[T]) Err() error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.err
}

// Close cancels the subscription (subscription/cancel) and closes Events.
// Events already queued are dropped from the consumer's view only if it
// stops reading; Close never blocks on the consumer.
func (s *Subscription[T]) Close() error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.ended {
		return nil
	}
	if c.subs[s.ID] == subscriber(s) {
		delete(c.subs, s.ID)
	}
	s.finish(nil)
	c.cancelSubLocked(s)
	return nil
}

func (s *Subscription[T]) subscriptionID() string { return s.ID }

// deliver queues one event without blocking the reader (c.mu held).
func (s *Subscription[T]) deliver(params json.RawMessage) {
	if s.ended {
		return
	}
	v, cursor, err := s.decode(params)
	if err != nil {
		s.c.log.Warn("oecp client: dropping undecodable event", "subscriptionId", s.ID, "err", err)
		return
	}
	select {
	case s.ch <- v:
		if cursor != "" {
			s.lastCursor = cursor
		}
	default:
		// The consumer is not keeping up. Drop the subscription rather
		// than stall the connection; a reconnecting watch resumes from the
		// last queued cursor.
		if s.c.subs[s.ID] == subscriber(s) {
			delete(s.c.subs, s.ID)
		}
		s.finish(&ClosedError{SubscriptionID: s.ID, Reason: "SLOW_CONSUMER", LastDeliveredCursor: s.lastCursor, Local: true})
		s.c.cancelSubLocked(s)
	}
}

// finish ends the subscription with err (c.mu held).
func (s *Subscription[T]) finish(err error) {
	if s.ended {
		return
	}
	s.ended = true
	if ce, ok := err.(*ClosedError); ok && ce.LastDeliveredCursor == "" {
		ce.LastDeliveredCursor = s.lastCursor
	}
	s.err = err
	close(s.ch)
}

// subscribe establishes a subscription whose result carries
// subscriptionId; the raw result is returned alongside.
func subscribe[T any](c *Conn, ctxCall func(establish func(json.RawMessage) (subscriber, error)) (response, error), decode func(json.RawMessage) (T, string, error)) (*Subscription[T], json.RawMessage, error) {
	r, err := ctxCall(func(result json.RawMessage) (subscriber, error) {
		id := subscriptionIDOf(result)
		if id == "" {
			return nil, fmt.Errorf("oecp client: subscription result has no subscriptionId: %s", truncate(result))
		}
		if _, dup := c.subs[id]; dup {
			return nil, fmt.Errorf("oecp client: server reused live subscription id %q", id)
		}
		return newSubscription(c, id, decode), nil
	})
	if err != nil {
		return nil, nil, err
	}
	return r.sub.(*Subscription[T]), r.result, nil
}
