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

	buf []store.Event
}

func (w *watchStream) closed() server.Notification {
	return server.Notification{Closed: protocol.SlowConsumer}
}

// Next yields the next event, waiting for a commit when caught up.
func (w *watchStream) Next(ctx context.Context) (server.Notification, error) {
	for {
		if len(w.buf) > 0 {
			ev := w.buf[0]
			w.buf = w.buf[1:]
			if w.drainTo > 0 && ev.Index > w.drainTo {
				w.buf = nil
				return w.closed(), nil
			}
			w.after, w.delivered = ev.Seq, ev.Index
			return server.Notification{Rest: ev.Body, Cursor: cursorString(ev.Seq)}, nil
		}
		if w.drainTo > 0 && w.delivered >= w.drainTo {
			return w.closed(), nil
		}
		if err := ctx.Err(); err != nil {
			return server.Notification{}, err
		}
		changed := w.b.store.Changed()
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
			if w.drainTo == 0 {
				base := max(w.delivered, w.tail)
				if run.Count > base+w.cap {
					w.drainTo = base + w.cap
				}
			}
			w.buf, err = tx.Events(w.tenant, w.runID, w.after, protocol.ReplayPageSize)
			return err
		})
		if err != nil {
			return server.Notification{}, err
		}
		if len(w.buf) > 0 || (w.drainTo > 0 && w.delivered >= w.drainTo) {
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return server.Notification{}, ctx.Err()
		}
	}
}

// Close releases nothing: the stream holds no registration.
func (w *watchStream) Close() {}
