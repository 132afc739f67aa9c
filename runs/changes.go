package runs

import (
	"context"
	"sync"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/store"
)

// The engine's change feed of native runs (engine.ChangeFeed). Every
// write path of a run in this process — each group-commit change of a
// run, an admission, a workspace that became ready — names the run to
// every feed after it committed, so the supervisor reconciles the runs
// that changed instead of every unfinished run. What other processes
// commit (several replicas on one shared store) is not named: a store
// that counts its wake-ups for those (store.ForeignWakes) makes the feed
// ask for a full pass when that count moved, and any other shared store
// makes it ask every time.

// maxFeedRuns bounds the runs one feed holds between two reads; past it
// the feed forgets them and asks for a full pass instead.
const maxFeedRuns = 1 << 16

// changeFeeds is the backend's set of feeds, one per Ledger.
type changeFeeds struct {
	mu   sync.Mutex
	subs []*runFeed
}

// runFeed is the runs changed since its last read. Guarded by the
// changeFeeds' mu.
type runFeed struct {
	runs     map[runKey]struct{}
	overflow bool
	// named is woken after a run is named (engine.TrailingFeed): the
	// store announces a commit before the feed names its runs.
	named store.Signal
}

func (f *changeFeeds) subscribe() *runFeed {
	f.mu.Lock()
	defer f.mu.Unlock()
	sub := &runFeed{runs: map[runKey]struct{}{}}
	f.subs = append(f.subs, sub)
	return sub
}

// changed names run k to every feed.
func (f *changeFeeds) changed(k runKey) {
	f.mu.Lock()
	subs := f.subs
	for _, sub := range subs {
		if sub.overflow {
			continue
		}
		if len(sub.runs) >= maxFeedRuns {
			sub.overflow, sub.runs = true, map[runKey]struct{}{}
			continue
		}
		sub.runs[k] = struct{}{}
	}
	f.mu.Unlock()
	for _, sub := range subs {
		sub.named.Wake()
	}
}

// take empties sub and returns what it held.
func (f *changeFeeds) take(sub *runFeed) (runs []engine.RunRef, overflow bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	runs = make([]engine.RunRef, 0, len(sub.runs))
	for k := range sub.runs {
		runs = append(runs, engine.RunRef{Tenant: k.tk, RunID: k.runID})
	}
	overflow = sub.overflow
	sub.overflow = false
	clear(sub.runs)
	return runs, overflow
}

// Changes names the native runs that changed since the previous call
// (engine.ChangeFeed).
func (l *Ledger) Changes(context.Context) ([]engine.RunRef, bool, error) {
	runs, all := l.b.changes.take(l.feed)
	if store.IsShared(l.b.store) {
		fw, ok := l.b.store.(store.ForeignWakes)
		if !ok {
			return runs, true, nil
		}
		n := fw.ForeignWakes()
		l.mu.Lock()
		if n != l.foreign {
			l.foreign, all = n, true
		}
		l.mu.Unlock()
	}
	return runs, all, nil
}

// Named returns a channel closed once the feed names a run after the
// call (engine.TrailingFeed).
func (l *Ledger) Named() <-chan struct{} { return l.feed.named.Changed() }

// remoteChanges is what a reader on a shared store waits on besides its
// run's own signal (which every write of this process wakes): the store's
// wake-ups for other processes' commits when it tells them apart
// (store.ForeignWakes), else every commit. So a commit of this process
// does not wake every watch of every run.
func remoteChanges(st store.Store) <-chan struct{} {
	if fw, ok := st.(store.ForeignWakes); ok {
		return fw.ForeignChanged()
	}
	return st.Changed()
}
