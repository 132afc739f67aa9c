package cluster

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// A run's live watchers share one store read per commit: the run's feed
// keeps a window of its latest events, read once and handed, shared, to
// every watcher whose position lies within it. A watcher before the window
// (a replay, or one that fell behind it) reads the store from its own
// position until it catches up, so the window only saves reads and never
// decides what a watcher sees: every watcher still yields exactly the
// run's events after its position, in order.
//
// The feed has no goroutine of its own. The watchers that find nothing new
// take the work in turn: while the feed is stale (a commit came after its
// last read) one of them reads for all, and while it is fresh one of them
// waits on the store's commit signal and the others wait for that one's
// read. Whoever leaves one of those roles wakes the waiters, so somebody
// always holds the role the others wait on.

// maxFeedWindow bounds the events a feed keeps beyond one replay page.
const maxFeedWindow = 4096

// errBehind: the watcher's position is before the feed's window; it reads
// the store itself until it catches up.
var errBehind = errors.New("cluster: watcher behind the feed window")

// watchEvent is a stored event with its cursor, formatted once.
type watchEvent struct {
	store.Event
	cursor string
}

func watchEvents(evs []store.Event) []watchEvent {
	out := make([]watchEvent, len(evs))
	for i, ev := range evs {
		out[i] = watchEvent{Event: ev, cursor: cursorString(ev.Seq)}
	}
	return out
}

// runFeed is the shared read of one run's events. The window win holds
// every event of the run with a sequence in (base, head], in order; its
// elements are never modified once published, so watchers keep slices of
// it without the lock.
type runFeed struct {
	st            store.Store
	tenant, runID string
	key           string
	keep          int // events kept after a trim; also the read limit
	refs          int // watchers joined; guarded by watchFeeds.mu

	mu         sync.Mutex
	base, head uint64
	win        []watchEvent
	count      uint64          // the run's event count as of the last read
	ended      bool            // the last read found the run gone or tombstoned
	more       bool            // the last read stopped at its limit
	changed    <-chan struct{} // the store's signal taken before the last read
	ready      chan struct{}   // closed when a role is left; then replaced
	reading    bool
	watching   bool
}

// stale reports whether the store may hold events the window lacks.
func (f *runFeed) stale() bool {
	if f.more {
		return true
	}
	select {
	case <-f.changed:
		return true
	default:
		return false
	}
}

// wake releases every watcher waiting for a read; the caller holds f.mu.
func (f *runFeed) wake() {
	close(f.ready)
	f.ready = make(chan struct{})
}

// take hands w the next page of events after its position, waiting for
// them when there are none yet. It fails with errBehind when w's position
// is before the window, and errStreamEnded once the run is gone.
func (f *runFeed) take(ctx context.Context, w *watchStream) error {
	f.mu.Lock()
	for {
		if w.after < f.base {
			f.mu.Unlock()
			return errBehind
		}
		if f.ended {
			f.mu.Unlock()
			return errStreamEnded
		}
		i := sort.Search(len(f.win), func(i int) bool { return f.win[i].Seq > w.after })
		if i < len(f.win) {
			j := min(len(f.win), i+protocol.ReplayPageSize)
			w.buf = f.win[i:j:j]
			count := f.count
			f.mu.Unlock()
			w.checkBacklog(count)
			return nil
		}
		if err := f.await(ctx); err != nil {
			f.mu.Unlock()
			return err
		}
	}
}

// await waits until the window may have grown. Entered and left with f.mu
// held. A stale feed is read by the caller unless a read is under way; a
// fresh one is watched for the next commit by one watcher while the others
// wait for its read.
func (f *runFeed) await(ctx context.Context) error {
	if !f.reading && f.stale() {
		return f.read(ctx)
	}
	if f.reading || f.watching {
		return f.waitFor(ctx, f.ready)
	}
	f.watching = true
	err := f.waitFor(ctx, f.changed)
	return f.leaveWatch(ctx, err)
}

// leaveWatch ends the caller's watch of the commit signal, with f.mu held.
// The waiters rely on the watcher, so leaving must hand its work on: on
// failure the waiters are woken and one of them watches instead; after a
// commit the caller reads the feed for everyone, unless a read is under
// way (its reader wakes them) or another watcher already read it (they
// are woken, and one of them watches the next commit).
func (f *runFeed) leaveWatch(ctx context.Context, err error) error {
	f.watching = false
	switch {
	case err != nil:
		f.wake()
	case f.reading:
	case f.stale():
		return f.read(ctx)
	default:
		f.wake()
	}
	return err
}

// waitFor waits for ch to close, or ctx to end, with f.mu released.
func (f *runFeed) waitFor(ctx context.Context, ch <-chan struct{}) error {
	f.mu.Unlock()
	defer f.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// read extends the window with the run's events after head, in one store
// snapshot with the run record. Entered and left with f.mu held; it wakes
// the waiters when done, whatever the outcome.
func (f *runFeed) read(ctx context.Context) error {
	f.reading = true
	head := f.head
	f.mu.Unlock()
	changed := f.st.Changed()
	var (
		evs []store.Event
		run store.Run
		ok  bool
	)
	err := f.st.View(ctx, func(tx store.ReadTx) error {
		var err error
		evs = nil
		run, ok, err = tx.Run(f.tenant, f.runID)
		if err != nil || !ok || run.Tombstoned {
			return err
		}
		evs, err = tx.Events(f.tenant, f.runID, head, f.keep)
		return err
	})
	f.mu.Lock()
	f.reading = false
	defer f.wake()
	if err != nil {
		return err
	}
	f.changed = changed
	f.ended = !ok || run.Tombstoned
	f.count = run.Count
	f.more = len(evs) == f.keep
	f.win = append(f.win, watchEvents(evs)...)
	if n := len(evs); n > 0 {
		f.head = evs[n-1].Seq
	}
	if len(f.win) > 2*f.keep {
		drop := len(f.win) - f.keep
		f.base = f.win[drop-1].Seq
		f.win = append([]watchEvent(nil), f.win[drop:]...)
	}
	return nil
}

// watchFeeds holds the feeds of the runs being watched live.
type watchFeeds struct {
	mu sync.Mutex
	m  map[string]*runFeed // tenant NUL runId -> feed
}

// joinFeed returns the feed of a run, counting one more watcher. A new feed
// starts from a watcher that has just caught up with the store: its
// position after, the run's event count then, and the store's signal taken
// before that read.
func (b *Backend) joinFeed(tenant, runID string, after, count uint64, changed <-chan struct{}) *runFeed {
	fs := &b.feeds
	key := tenant + "\x00" + runID
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := fs.m[key]
	if f == nil {
		if fs.m == nil {
			fs.m = map[string]*runFeed{}
		}
		f = &runFeed{
			st: b.store, tenant: tenant, runID: runID, key: key,
			keep:  b.feedWindow,
			base:  after,
			head:  after,
			count: count, changed: changed, ready: make(chan struct{}),
		}
		fs.m[key] = f
	}
	f.refs++
	return f
}

// leaveFeed counts one watcher less; the last one drops the feed.
func (b *Backend) leaveFeed(f *runFeed) {
	fs := &b.feeds
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f.refs--; f.refs == 0 && fs.m[f.key] == f {
		delete(fs.m, f.key)
	}
}
