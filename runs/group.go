package runs

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/oecp/oecp/runs/logbuf"
	"github.com/oecp/oecp/store"
)

// Group commit. Every native-run write (an admission, a claim, each write
// of the supervisor, a force, a log flush) is a change queued on one
// committer. The first writer to find no commit in progress leads: it
// applies every queued change, in queue order, in one store transaction,
// tells each writer its own outcome, and hands the lead to the first
// change queued meanwhile. So writes that arrive together share one
// commit, and the native-run writes of one process stay serialized.
//
// A change that fails must not fail or lose its batch-mates: the batch is
// applied again without it, and it is applied once more on its own after
// the batch has committed; the outcome of that solo attempt is its
// answer, so every answer is the one of some serial order of the
// changes. A batch that fails for any other reason (its commit), or that
// has a second change fail, is applied change by change.
//
// A run's pending log lines are taken once per batch and appended by the
// first change for the run that commits, so that they precede every
// record of the run committed after they were logged.

// change is one queued write.
type change struct {
	ctx context.Context
	// key is the run the change writes (its log lines go first); zero
	// for a write that is no run's (an admission, a claim).
	key   runKey
	apply func(tx store.Tx, lines []logbuf.Line) error
	err   error
	// turn receives true when the change's writer leads the next batch,
	// false when another leader has committed (or failed) the change.
	turn chan bool
}

// committer is the queue of changes waiting for a commit.
type committer struct {
	mu      sync.Mutex
	queue   []*change
	leading bool
}

// commit applies one change in a group commit and returns its outcome.
func (b *Backend) commit(ctx context.Context, key runKey, apply func(tx store.Tx, lines []logbuf.Line) error) error {
	c := &change{ctx: ctx, key: key, apply: apply, turn: make(chan bool, 1)}
	g := &b.group
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if !g.leading {
		g.leading = true
		c.turn <- true
	}
	g.mu.Unlock()
	if lead := <-c.turn; !lead {
		return c.err
	}
	g.mu.Lock()
	batch := g.queue
	g.queue = nil
	g.mu.Unlock()
	b.commitBatch(context.WithoutCancel(ctx), batch)
	for _, m := range batch {
		if m != c {
			m.turn <- false
		}
	}
	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].turn <- true
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	return c.err
}

// commitBatch applies a batch and sets each change's outcome. A change
// whose context ended while it was queued is answered with its error and
// not applied. Only the leader calls it, so batches never overlap: a
// run's log lines, taken here, precede the records committed after them.
func (b *Backend) commitBatch(ctx context.Context, batch []*change) {
	lines := map[runKey][]logbuf.Line{}
	live := make([]*change, 0, len(batch))
	for _, c := range batch {
		if c.err = c.ctx.Err(); c.err != nil {
			continue
		}
		if _, ok := lines[c.key]; !ok && c.key != (runKey{}) {
			lines[c.key] = b.logs.Take(c.key.tk, c.key.runID)
		}
		live = append(live, c)
	}
	for _, c := range b.applyTogether(ctx, live, lines) {
		c.err = b.apply(ctx, []*change{c}, lines)
	}
	b.keepUnwritten(live, lines)
	for _, c := range batch {
		if c.key != (runKey{}) {
			b.wake.notify(c.key)
			b.changes.Changed(c.key.ref())
		}
	}
}

// keepUnwritten gives back to the log buffer the lines of runs whose
// write failed with the store unavailable, and ends the hold of runs
// written.
func (b *Backend) keepUnwritten(cs []*change, lines map[runKey][]logbuf.Line) {
	for _, c := range cs {
		if c.err == nil && c.key != (runKey{}) {
			b.logs.Release(c.key.tk, c.key.runID)
		}
		ls, ok := lines[c.key]
		if !ok || !errors.Is(c.err, store.ErrUnavailable) {
			continue
		}
		delete(lines, c.key)
		b.logs.Hold(c.key.tk, c.key.runID, ls)
	}
}

// applyTogether commits the changes in one transaction and returns those
// left to apply alone: the one that failed (the others are applied again
// without it), or all of them when the commit failed or a second change
// failed. A lone change's failure is its answer.
func (b *Backend) applyTogether(ctx context.Context, live []*change, lines map[runKey][]logbuf.Line) (alone []*change) {
	for retried := false; len(live) > 0; retried = true {
		err := b.apply(ctx, live, lines)
		if err == nil {
			return alone
		}
		failed := slices.IndexFunc(live, func(c *change) bool { return c.err != nil })
		switch {
		case len(live) == 1 && failed == 0:
			return alone
		case failed < 0 || retried:
			return append(alone, live...)
		}
		alone = append(alone, live[failed])
		live = slices.Delete(slices.Clone(live), failed, failed+1)
	}
	return alone
}

// apply runs the changes in order in one transaction. When a change fails
// the transaction is abandoned, that change's err is set (every other
// one's cleared) and its error returned; any other error is the
// transaction's. On a commit, each run's lines are spent.
func (b *Backend) apply(ctx context.Context, cs []*change, lines map[runKey][]logbuf.Line) error {
	used := map[runKey]bool{}
	err := b.store.Update(ctx, func(tx store.Tx) error {
		clear(used)
		for _, c := range cs {
			c.err = nil
		}
		for _, c := range cs {
			var ls []logbuf.Line
			if c.key != (runKey{}) && !used[c.key] {
				ls, used[c.key] = lines[c.key], true
			}
			if err := c.apply(tx, ls); err != nil {
				c.err = err
				return err
			}
		}
		return nil
	})
	if err == nil {
		for k := range used {
			delete(lines, k)
		}
	}
	if err != nil {
		// The store's error is the change's answer: it says what the
		// change met inside the transaction, classified (a read that
		// failed because the store is unavailable wraps
		// store.ErrUnavailable only there), so that the change's log
		// lines are kept for later instead of dropped.
		for _, c := range cs {
			if c.err != nil {
				c.err = err
			}
		}
	}
	return err
}
