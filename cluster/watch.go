package cluster

import (
	"context"
	"errors"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
)

// errStreamEnded ends a watch silently (its run was tombstoned).
var errStreamEnded = errors.New("cluster: watch ended")

// Watch establishes a durable watch of a run. Resolution, the tail snapshot
// and the parking high-water mark are read in one store snapshot; the
// stream then reads the store strictly after its own position, so replay
// and live delivery are the same read and can neither gap nor duplicate.
func (b *Backend) Watch(ctx context.Context, p protocol.WatchParams) (*server.Subscription, error) {
	tenant := b.tenant(ctx)
	w := &watchStream{b: b, tenant: tenant, cap: uint64(b.cfg.QueueCapacity)}
	var res protocol.WatchResult
	err := b.store.View(ctx, func(tx store.ReadTx) error {
		runID := ""
		if p.RunID != nil {
			runID = *p.RunID
		} else {
			st, _, err := load(tx, tenant)
			if err != nil {
				return err
			}
			runID = st.RunID
		}
		if runID == "" {
			// Parked: attach to the first run whose first event comes
			// after everything committed now.
			if p.FromCursor != nil {
				return protocol.AppError(protocol.NotFound, protocol.MsgRunNotFound, nil)
			}
			last, err := tx.LastSeq()
			if err != nil {
				return err
			}
			w.parked, w.parkedAfter = true, last
			return nil
		}
		run, ok, err := tx.Run(tenant, runID)
		if err == nil && !ok {
			err = compactedCursor(tx, p.FromCursor)
		}
		if err != nil {
			return err
		}
		if !ok {
			return protocol.AppError(protocol.NotFound, protocol.MsgRunNotFound, nil)
		}
		if run.Tombstoned {
			var at *string
			if run.LastSeq > 0 {
				c := cursorString(run.LastSeq)
				at = &c
			}
			return protocol.AppError(protocol.Gone, protocol.MsgRunGone, map[string]any{"tombstonedAt": at})
		}
		if p.FromCursor != nil {
			seq, ok := parseCursor(*p.FromCursor)
			if !ok {
				return protocol.AppError(protocol.NotFound, protocol.MsgRunNotFound, nil)
			}
			ev, ok, err := tx.Event(tenant, seq)
			if err != nil {
				return err
			}
			if !ok || ev.RunID != runID {
				return protocol.AppError(protocol.NotFound, protocol.MsgRunNotFound, nil)
			}
			w.after, w.delivered = ev.Seq, ev.Index
		}
		w.runID = runID
		w.tail = run.Count
		res.RunID = &w.runID
		if run.LastSeq > 0 {
			c := cursorString(run.LastSeq)
			res.AtCursor = &c
		}
		return nil
	})
	if err != nil {
		return nil, b.wire(err)
	}
	res.SubscriptionID = b.nextSubscription()
	return &server.Subscription{ID: res.SubscriptionID, Result: &res, Stream: w, TrackCursor: true}, nil
}

// watchStream delivers one run's events from the store. Its position is
// (after, delivered): the sequence and the in-run index of the last event
// it yielded. tail is the run's event count at establishment: events up to
// it are replay, events after it are live and count against the queue
// capacity. When the live backlog (events committed but not yet yielded)
// exceeds the capacity, the stream behaves like the reference's bounded
// queue that overflowed: it still yields the capacity's worth of events
// that would have been queued, then closes with SLOW_CONSUMER.
//
// It reads the store from its own position until it has caught up, then
// follows the run's shared feed (feed.go), reading the store itself again
// whenever its position is before the feed's window.
type watchStream struct {
	b      *Backend
	tenant string
	cap    uint64

	parked      bool
	parkedAfter uint64
	runID       string

	after     uint64
	delivered uint64
	tail      uint64
	drainTo   uint64 // 0 until overflow; then the last index to yield

	feed *runFeed // joined on first catching up; left by Close

	buf []watchEvent // read, not yet yielded; shared with the feed, never modified
}

var _ server.BatchStream = (*watchStream)(nil)

func (w *watchStream) closed() server.Notification {
	return server.Notification{Closed: protocol.SlowConsumer}
}

// Next yields the next event, waiting for a commit when caught up.
func (w *watchStream) Next(ctx context.Context) (server.Notification, error) {
	if err := w.fill(ctx); err != nil {
		return server.Notification{}, err
	}
	return w.pop(), nil
}

// NextBatch yields, after waiting like Next for the first, the events read
// and not yet yielded, at most max.
func (w *watchStream) NextBatch(ctx context.Context, buf []server.Notification, max int) ([]server.Notification, error) {
	if err := w.fill(ctx); err != nil {
		return buf, err
	}
	for len(buf) < max {
		n := w.pop()
		buf = append(buf, n)
		if n.Closed != "" || len(w.buf) == 0 {
			break
		}
	}
	return buf, nil
}

// drained reports that an overflowed stream yielded all it may.
func (w *watchStream) drained() bool { return w.drainTo > 0 && w.delivered >= w.drainTo }

// pop yields the first buffered event, or the SLOW_CONSUMER close once
// the stream has drained; fill has run.
func (w *watchStream) pop() server.Notification {
	if len(w.buf) == 0 {
		return w.closed()
	}
	ev := w.buf[0]
	w.buf = w.buf[1:]
	if w.drainTo > 0 && ev.Index > w.drainTo {
		w.buf = nil
		return w.closed()
	}
	w.after, w.delivered = ev.Seq, ev.Index
	return server.Notification{Rest: ev.Body, Cursor: ev.cursor}
}

// fill reads until an event is buffered or the stream has drained.
func (w *watchStream) fill(ctx context.Context) error {
	for len(w.buf) == 0 && !w.drained() {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := errBehind
		if w.feed != nil {
			err = w.feed.take(ctx, w)
		}
		if errors.Is(err, errBehind) {
			err = w.readStore(ctx)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkBacklog starts the drain once the live backlog, with the run at
// count events, exceeds the capacity.
func (w *watchStream) checkBacklog(count uint64) {
	if w.drainTo == 0 {
		base := max(w.delivered, w.tail)
		if count > base+w.cap {
			w.drainTo = base + w.cap
		}
	}
}

// readStore reads a page after the stream's own position. When there is
// none it has caught up and joins the run's feed; otherwise (still parked,
// or the feed already joined) it waits for the next commit.
func (w *watchStream) readStore(ctx context.Context) error {
	changed := w.b.store.Changed()
	var evs []store.Event
	var count uint64
	err := w.b.store.View(ctx, func(tx store.ReadTx) error {
		if w.parked {
			r, ok, err := tx.FirstRunAfter(w.tenant, w.parkedAfter)
			if err != nil || !ok {
				return err
			}
			w.parked, w.runID = false, r.ID
		}
		run, ok, err := tx.Run(w.tenant, w.runID)
		if err != nil {
			return err
		}
		if !ok || run.Tombstoned {
			return errStreamEnded
		}
		count = run.Count
		evs, err = tx.Events(w.tenant, w.runID, w.after, protocol.ReplayPageSize)
		return err
	})
	if err != nil {
		return err
	}
	if !w.parked {
		w.checkBacklog(count)
		w.buf = watchEvents(evs)
		if len(evs) > 0 || w.drained() {
			return nil
		}
		if w.feed == nil {
			w.feed = w.b.joinFeed(w.tenant, w.runID, w.after, count, changed)
			return nil
		}
	}
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close leaves the run's feed.
func (w *watchStream) Close() {
	if w.feed != nil {
		w.b.leaveFeed(w.feed)
		w.feed = nil
	}
}
