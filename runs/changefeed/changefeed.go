// Package changefeed keeps, for each engine change feed of native runs,
// the runs named to it since its last read. Every write path of a run in
// the process names the run to every feed after it committed (Changed),
// so the supervisor reconciles the runs that changed instead of every
// unfinished run. A feed that would hold more than MaxRuns forgets them
// and reports an overflow instead: a full pass is then due.
//
// The package imports engine and store, nothing of package runs.
package changefeed

import (
	"sync"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/store"
)

// MaxRuns bounds the runs one feed holds between two reads.
const MaxRuns = 1 << 16

// Feeds is a set of feeds; its zero value has none. It is safe for
// concurrent use.
type Feeds struct {
	mu   sync.Mutex
	subs []*Feed
}

// Feed is the runs changed since its last read (Take).
type Feed struct {
	set *Feeds
	// runs and overflow are guarded by set.mu.
	runs     map[engine.RunRef]struct{}
	overflow bool
	// named is woken after a run is named: the store announces a commit
	// before the feed names its runs.
	named store.Signal
}

// Subscribe adds a feed to the set.
func (f *Feeds) Subscribe() *Feed {
	f.mu.Lock()
	defer f.mu.Unlock()
	sub := &Feed{set: f, runs: map[engine.RunRef]struct{}{}}
	f.subs = append(f.subs, sub)
	return sub
}

// Changed names a run to every feed, then wakes the feeds' Named
// channels.
func (f *Feeds) Changed(ref engine.RunRef) {
	f.mu.Lock()
	subs := f.subs
	for _, sub := range subs {
		if sub.overflow {
			continue
		}
		if len(sub.runs) >= MaxRuns {
			sub.overflow, sub.runs = true, map[engine.RunRef]struct{}{}
			continue
		}
		sub.runs[ref] = struct{}{}
	}
	f.mu.Unlock()
	for _, sub := range subs {
		sub.named.Wake()
	}
}

// Take empties the feed and returns the runs it held, and whether it
// overflowed since the last Take.
func (f *Feed) Take() (runs []engine.RunRef, overflow bool) {
	f.set.mu.Lock()
	defer f.set.mu.Unlock()
	runs = make([]engine.RunRef, 0, len(f.runs))
	for ref := range f.runs {
		runs = append(runs, ref)
	}
	overflow = f.overflow
	f.overflow = false
	clear(f.runs)
	return runs, overflow
}

// Named returns a channel closed once a run is named to the feed after
// the call.
func (f *Feed) Named() <-chan struct{} { return f.named.Changed() }
