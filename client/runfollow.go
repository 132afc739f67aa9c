package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oecp/oecp/protocol"
)

// RunFollower is a run/watch or run/logs stream that survives a slow
// consumer close and dropped connections: it resumes strictly after the
// last event it delivered, on the same connection or a newly dialled
// one, so the consumer sees each event once and in order. Events is
// closed when the server ends the stream (done: after the run's terminal
// record), when the context ends or Close is called, or when resuming is
// impossible; Err then says which.
type RunFollower[E any] struct {
	out    chan E
	done   chan struct{}
	cancel context.CancelFunc
	err    error // set before done is closed
}

// Events delivers the stream's events.
func (f *RunFollower[E]) Events() <-chan E { return f.out }

// Err waits for the follower to end and says why: nil after the server's
// done close or Close, the context's error, or what made resuming
// impossible (a server error, a connection that could not be dialled).
func (f *RunFollower[E]) Err() error {
	<-f.done
	return f.err
}

// Close stops the follower and waits for it to end.
func (f *RunFollower[E]) Close() {
	f.cancel()
	<-f.done
}

// FollowRunWatch follows the run/watch stream of run o.RunID (see
// RunFollower). It takes FollowWatch's options: Conn, Dial, MaxRedials,
// Backoff and OnReconnect work alike, FromCursor is where the stream
// starts (strictly after), and Forever and Log are not used. The first
// subscription is made before it returns, so a refusal (an unknown run or
// cursor) is its error.
func FollowRunWatch(ctx context.Context, o FollowOptions) (*RunFollower[RunWatchEvent], error) {
	return followRun(ctx, o, func(ctx context.Context, c *Conn, from string) (*Subscription[RunWatchEvent], error) {
		sub, _, err := c.RunWatch(ctx, RunWatchParams{RunID: o.RunID, FromCursor: from})
		return sub, err
	})
}

// FollowRunLogs follows the run/logs stream of run o.RunID, only
// execution's records when it is not "" (see FollowRunWatch).
func FollowRunLogs(ctx context.Context, o FollowOptions, execution string) (*RunFollower[RunLogEvent], error) {
	return followRun(ctx, o, func(ctx context.Context, c *Conn, from string) (*Subscription[RunLogEvent], error) {
		sub, _, err := c.RunLogs(ctx, RunLogsParams{RunID: o.RunID, FromCursor: from, Execution: execution})
		return sub, err
	})
}

// runStream is one run/* follower's state on its goroutine.
type runStream[E any, P runEvent[E]] struct {
	o     FollowOptions
	open  func(ctx context.Context, c *Conn, from string) (*Subscription[E], error)
	conn  *Conn
	owned bool   // conn was dialled here, so it is closed here
	last  string // cursor of the last event delivered
}

func followRun[E any, P runEvent[E]](ctx context.Context, o FollowOptions, open func(context.Context, *Conn, string) (*Subscription[E], error)) (*RunFollower[E], error) {
	if o.MaxRedials <= 0 {
		o.MaxRedials = 8
	}
	if o.Backoff == nil {
		o.Backoff = defaultBackoff
	}
	s := &runStream[E, P]{o: o, open: open, conn: o.Conn, last: o.FromCursor}
	sub, err := open(ctx, s.conn, s.last)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &RunFollower[E]{out: make(chan E), done: make(chan struct{}), cancel: cancel}
	go func() {
		f.err = s.run(ctx, sub, f.out)
		if s.owned {
			_ = s.conn.Close()
		}
		close(f.out)
		close(f.done)
	}()
	return f, nil
}

// run delivers sub's events and resumes after each end of a subscription
// until the stream is over; it returns the follower's Err.
func (s *runStream[E, P]) run(ctx context.Context, sub *Subscription[E], out chan<- E) error {
	for {
		// The context ends the wait for the next event as well as its
		// delivery: an interrupted follower returns at once, not when the
		// run next changes.
	deliver:
		for {
			select {
			case ev, ok := <-sub.Events():
				if !ok {
					break deliver
				}
				select {
				case out <- ev:
					s.last = P(&ev).cursor()
				case <-ctx.Done():
					_ = sub.Close()
					return ignoreCancel(ctx)
				}
			case <-ctx.Done():
				_ = sub.Close()
				return ignoreCancel(ctx)
			}
		}
		cause := sub.Err()
		var ce *ClosedError
		switch {
		case Done(cause):
			return nil
		case ctx.Err() != nil:
			return ignoreCancel(ctx)
		case errors.As(cause, &ce) && ce.Reason == protocol.SlowConsumer:
			s.notify(cause)
			var err error
			if sub, err = s.open(ctx, s.conn, s.last); err == nil {
				continue
			} else if !errIsConn(err) {
				return err
			}
			cause = err
		case !errIsConn(cause):
			return cause
		}
		var err error
		if sub, err = s.redial(ctx, cause); err != nil || sub == nil {
			// No subscription and no error: the follower was cancelled
			// while it waited to redial.
			return err
		}
	}
}

func (s *runStream[E, P]) notify(cause error) {
	if s.o.OnReconnect != nil {
		s.o.OnReconnect(cause, s.last)
	}
}

// redial opens a new connection after cause ended the last one and
// resubscribes on it, waiting Backoff(n) before the n-th attempt.
func (s *runStream[E, P]) redial(ctx context.Context, cause error) (*Subscription[E], error) {
	if s.o.Dial == nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDialer, cause)
	}
	for n := 1; ; n++ {
		s.notify(cause)
		t := time.NewTimer(s.o.Backoff(n))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ignoreCancel(ctx)
		}
		c, err := s.o.Dial(ctx)
		if err == nil {
			if s.owned {
				_ = s.conn.Close()
			}
			s.conn, s.owned = c, true
			var sub *Subscription[E]
			if sub, err = s.open(ctx, c, s.last); err == nil || !errIsConn(err) {
				return sub, err
			}
		}
		if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrURLRefused) {
			return nil, err
		}
		if cause = err; n >= s.o.MaxRedials {
			return nil, fmt.Errorf("could not resume run %s after %d attempts: %w", s.o.RunID, n, err)
		}
	}
}
