package runs

import (
	"context"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/store"
)

// The engine's change feed of native runs (engine.ChangeFeed). Every
// write path of a run in this process — each group-commit change of a
// run, an admission, a workspace that became ready — names the run to
// every feed after it committed (package runs/changefeed), so the
// supervisor reconciles the runs that changed instead of every unfinished
// run. What other processes commit (several replicas on one shared store)
// is not named: a store that counts its wake-ups for those
// (store.ForeignWakes) makes the feed ask for a full pass when that count
// moved, and any other shared store makes it ask every time.

// Changes names the native runs that changed since the previous call
// (engine.ChangeFeed).
func (l *Ledger) Changes(context.Context) ([]engine.RunRef, bool, error) {
	runs, all := l.feed.Take()
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
func (l *Ledger) Named() <-chan struct{} { return l.feed.Named() }

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
