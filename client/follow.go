package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/oecp/oecp/protocol"
)

// Dialer opens a new connection for a reconnecting watch.
type Dialer func(ctx context.Context) (*Conn, error)

// FollowOptions configure FollowWatch.
type FollowOptions struct {
	// RunID pins the run to watch; empty watches the current run (and, if
	// there is none yet, the next one to start). Once the watch knows its
	// run it stays on it across reconnects.
	RunID string
	// FromCursor replays history strictly after this cursor. A cursor the
	// server does not know fails FollowWatch with NOT_FOUND.
	FromCursor string
	// Forever keeps watching after the run's finished event (until ctx ends
	// or Close); otherwise the watch ends after delivering it.
	Forever bool
	// Conn is the first connection to use; FollowWatch does not close it.
	Conn *Conn
	// Dial opens connections: the first one when Conn is nil, and new ones
	// after a connection drops. Nil means no reconnection.
	Dial Dialer
	// MaxRedials bounds consecutive failed dials before giving up
	// (default 8).
	MaxRedials int
	// Backoff is the wait before the n-th consecutive redial (n from 1);
	// default 100ms doubling up to 5s.
	Backoff func(n int) time.Duration
	// OnReconnect, if set, is told about each resumption (for progress
	// output): why, and the cursor the watch resumes after.
	OnReconnect func(cause error, fromCursor string)
	Log         *slog.Logger
}

// Watcher is a watch that survives dropped connections and slow-consumer
// closes. Each (runId, cursor) is delivered at most once and in order.
type Watcher struct {
	opts   FollowOptions
	tail   string // set by the first establishment, before FollowWatch returns; then read-only
	out    chan WatchEvent
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	err     error
	runID   string
	last    string // cursor of the last event delivered to the consumer
	seen    map[string]struct{}
	conn    *Conn // current connection
	ownConn bool  // conn was dialled here (closed here)
	sub     *Subscription[WatchEvent]
}

// ErrNoDialer is returned when a watch lost its connection and has no way
// to open another.
var ErrNoDialer = errors.New("oecp client: connection lost and no dialer to reconnect")

// FollowWatch establishes a watch and keeps it going. The first
// establishment happens before it returns, so a NOT_FOUND or GONE run is
// reported here. Read Events until it is closed, then check Err.
func FollowWatch(ctx context.Context, opts FollowOptions) (*Watcher, error) {
	if opts.MaxRedials <= 0 {
		opts.MaxRedials = 8
	}
	if opts.Backoff == nil {
		opts.Backoff = defaultBackoff
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	w := &Watcher{opts: opts, out: make(chan WatchEvent), done: make(chan struct{}), seen: map[string]struct{}{}, runID: opts.RunID, last: opts.FromCursor}
	if opts.Conn != nil {
		w.conn = opts.Conn
	} else {
		if opts.Dial == nil {
			return nil, ErrNoDialer
		}
		c, err := opts.Dial(ctx)
		if err != nil {
			return nil, err
		}
		w.conn, w.ownConn = c, true
	}
	if err := w.establish(ctx, false); err != nil {
		w.dropConn()
		return nil, err
	}
	var rctx context.Context
	rctx, w.cancel = context.WithCancel(ctx)
	go w.run(rctx)
	return w, nil
}

func defaultBackoff(n int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < n && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}

// Events delivers the watch's events; it is closed when the watch ends.
func (w *Watcher) Events() <-chan WatchEvent { return w.out }

// Err says why Events closed: nil after a finished event (or Close), the
// context's error, or what made resuming impossible (a GONE run, a server
// error, a connection that could not be re-established).
func (w *Watcher) Err() error {
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// RunID is the run being watched ("" while the watch waits for a run).
func (w *Watcher) RunID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runID
}

// HistoryTail is the run's last cursor when the watch was established:
// events up to and including it are history, later ones happened live
// ("" when the watch waited for a run, so every event is live).
func (w *Watcher) HistoryTail() string { return w.tail }

// LastCursor is the cursor of the last event delivered.
func (w *Watcher) LastCursor() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Close stops the watch and waits for it to end.
func (w *Watcher) Close() {
	w.cancel()
	<-w.done
}

// establish subscribes on w.conn from the last delivered cursor. When
// resuming, a NOT_FOUND for that cursor restarts the run from its first
// event (events already delivered are skipped); the caller's own
// FromCursor is never replaced, so an unknown one is an error.
func (w *Watcher) establish(ctx context.Context, resuming bool) error {
	w.mu.Lock()
	p := WatchParams{RunID: w.runID, FromCursor: w.last}
	c := w.conn
	w.mu.Unlock()
	sub, res, err := c.Watch(ctx, p)
	if ErrorCode(err) == protocol.NotFound && p.FromCursor != "" && resuming {
		w.opts.Log.Debug("oecp client: cursor unknown, replaying the run from its start", "cursor", p.FromCursor)
		p.FromCursor = ""
		sub, res, err = c.Watch(ctx, p)
	}
	if Compacted(err) && resuming {
		sub, res, err = w.relist(ctx, c, p.RunID)
	}
	if err != nil {
		return err
	}
	w.mu.Lock()
	if w.runID == "" && res.RunID != nil {
		w.runID = *res.RunID
	}
	if !resuming && res.AtCursor != nil {
		w.tail = *res.AtCursor
	}
	w.sub = sub
	w.mu.Unlock()
	return nil
}

func (w *Watcher) dropConn() {
	w.mu.Lock()
	c, own := w.conn, w.ownConn
	w.conn, w.ownConn = nil, false
	w.mu.Unlock()
	if c != nil && own {
		_ = c.Close()
	}
}

func (w *Watcher) end(err error) {
	w.mu.Lock()
	w.err = err
	sub := w.sub
	w.mu.Unlock()
	if sub != nil {
		_ = sub.Close()
	}
	w.dropConn()
	close(w.out)
	close(w.done)
}

func (w *Watcher) run(ctx context.Context) {
	for {
		w.mu.Lock()
		sub := w.sub
		w.mu.Unlock()
		var (
			ev WatchEvent
			ok bool
		)
		select {
		case ev, ok = <-sub.Events():
		case <-ctx.Done():
			w.end(ignoreCancel(ctx))
			return
		}
		if !ok {
			if !w.resume(ctx, sub.Err()) {
				return
			}
			continue
		}
		key := ev.RunID + "\x00" + ev.Cursor
		w.mu.Lock()
		_, dup := w.seen[key]
		if w.runID == "" {
			w.runID = ev.RunID
		}
		w.mu.Unlock()
		if dup {
			continue
		}
		select {
		case w.out <- ev:
		case <-ctx.Done():
			w.end(ignoreCancel(ctx))
			return
		}
		w.mu.Lock()
		w.seen[key] = struct{}{}
		w.last = ev.Cursor
		w.mu.Unlock()
		if ev.Event.Type == protocol.EventFinished && !w.opts.Forever {
			w.end(nil)
			return
		}
	}
}

// ignoreCancel maps the end of the watch's own context to nil when Close
// caused it.
func ignoreCancel(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return nil
	}
	return ctx.Err()
}

// resume re-establishes the watch after its subscription ended with cause.
// It reports false when the watch is over.
func (w *Watcher) resume(ctx context.Context, cause error) bool {
	var ce *ClosedError
	switch {
	case Done(cause):
		w.end(nil)
		return false
	case errors.As(cause, &ce):
		// SLOW_CONSUMER (server or local): same connection, from the last
		// cursor delivered to the consumer.
		if w.opts.OnReconnect != nil {
			w.opts.OnReconnect(cause, w.LastCursor())
		}
		err := w.establish(ctx, true)
		if err == nil {
			return true
		}
		if !errIsConn(err) {
			w.end(w.finalErr(ctx, err))
			return false
		}
		cause = err
	case cause == nil:
		w.end(ignoreCancel(ctx)) // closed under us
		return false
	}
	// The connection is gone: dial a new one.
	w.dropConn()
	if w.opts.Dial == nil {
		w.end(fmt.Errorf("%w: %v", ErrNoDialer, cause))
		return false
	}
	for n := 1; ; n++ {
		if w.opts.OnReconnect != nil {
			w.opts.OnReconnect(cause, w.LastCursor())
		}
		t := time.NewTimer(w.opts.Backoff(n))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			w.end(ignoreCancel(ctx))
			return false
		}
		c, err := w.opts.Dial(ctx)
		if err == nil {
			w.mu.Lock()
			w.conn, w.ownConn = c, true
			w.mu.Unlock()
			err = w.establish(ctx, true)
			if err == nil {
				return true
			}
			w.dropConn()
			if !errIsConn(err) {
				w.end(w.finalErr(ctx, err))
				return false
			}
		}
		if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrURLRefused) {
			w.end(err)
			return false
		}
		cause = err
		if n >= w.opts.MaxRedials {
			w.end(fmt.Errorf("watch could not reconnect after %d attempts: %w", n, err))
			return false
		}
	}
}

func (w *Watcher) finalErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ignoreCancel(ctx)
	}
	return err
}

// relist recovers a resuming watch whose run retention deleted meanwhile
// (Compacted): it re-reads the cluster's state and follows its current
// run from its first event, as a Kubernetes client re-lists after a 410.
// Events already delivered are skipped by their (runId, cursor).
func (w *Watcher) relist(ctx context.Context, c *Conn, gone string) (*Subscription[WatchEvent], *protocol.WatchResult, error) {
	st, err := c.Get(ctx, GetParams{})
	if err != nil {
		return nil, nil, err
	}
	current := ""
	if st.Status.CurrentRunID != nil {
		current = *st.Status.CurrentRunID
	}
	w.opts.Log.Debug("oecp client: the watched run was compacted; following the current run", "run", gone, "current", current)
	w.mu.Lock()
	w.runID, w.last = current, ""
	w.mu.Unlock()
	return c.Watch(ctx, WatchParams{RunID: current})
}
