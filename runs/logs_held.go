package runs

import (
	"errors"
	"time"

	"github.com/oecp/oecp/store"
)

// Log lines outlive a store that cannot write. The lines a write took
// from the buffer go back to it, ahead of the lines logged since, when
// the write failed because the store is unavailable (a database that is
// down or restarting): the next write of the run, or the flusher's next
// try, writes them, in order. While they wait, at most maxHeldLines lines
// of each execution are kept; later ones are dropped and counted in the
// server's log.

// maxHeldLines bounds the lines of one execution (or of the run itself)
// kept while the store cannot write.
const maxHeldLines = 1000

// logRetryPause is how long the flusher waits before it tries again to
// write lines the store could not take.
const logRetryPause = time.Second

// keepUnwritten gives back to the buffer the lines of runs whose write
// failed with the store unavailable.
func (b *Backend) keepUnwritten(cs []*change, lines map[runKey][]logLine) {
	for _, c := range cs {
		if c.err == nil && c.key != (runKey{}) {
			b.logs.unhold(c.key)
		}
		ls, ok := lines[c.key]
		if !ok || !errors.Is(c.err, store.ErrUnavailable) {
			continue
		}
		delete(lines, c.key)
		if dropped := b.logs.restore(c.key, ls); dropped > 0 {
			b.cfg.Log.Warn("runs: log lines dropped while the store is unavailable", "run", c.key.runID, "dropped", dropped, "kept_per_execution", maxHeldLines)
		}
	}
}

// restore puts lines back ahead of the run's pending lines, keeping at
// most maxHeldLines per execution, and returns how many it dropped; until
// a write of the run succeeds (unhold), add keeps to the same bound.
func (l *logBuffer) restore(k runKey, lines []logLine) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		l.pending = map[runKey][]logLine{}
	}
	if l.held == nil {
		l.held = map[runKey]bool{}
	}
	l.held[k] = true
	all := append(lines, l.pending[k]...)
	count := map[string]int{}
	kept := all[:0]
	for _, line := range all {
		if count[line.execution]++; count[line.execution] <= maxHeldLines {
			kept = append(kept, line)
		}
	}
	l.pending[k] = kept
	return len(all) - len(kept)
}

// unhold ends the bound of a run whose write succeeded.
func (l *logBuffer) unhold(k runKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, k)
}

// full reports whether a held run already keeps maxHeldLines lines of
// execution; l.mu is held.
func (l *logBuffer) full(k runKey, execution string) bool {
	if !l.held[k] {
		return false
	}
	n := 0
	for _, line := range l.pending[k] {
		if line.execution == execution {
			n++
		}
	}
	return n >= maxHeldLines
}
