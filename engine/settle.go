package engine

import (
	"context"
	"errors"
	"time"
)

// Backoff bounds of the retries of writes that failed (the store could not
// write): the first retry waits minBackoff, each next one twice as long, at
// most maxBackoff.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// backoff is the delay before the next retry of a failing write.
type backoff struct{ d time.Duration }

func (b *backoff) next() time.Duration {
	b.d = min(max(2*b.d, minBackoff), maxBackoff)
	return b.d
}

func (b *backoff) reset() { b.d = 0 }

// pendingSettlement is a finished execution waiting to be recorded.
type pendingSettlement struct {
	Settlement
	ref      string // the ExecutionRef, target of the log records about it
	failures int    // failed attempts to record it so far
}

// settleLoop records pending settlements when a worker finishes, until ctx
// is done. After a failed attempt it waits a backoff before the next one;
// settlements that finish meanwhile wait with the others.
func (s *Supervisor) settleLoop(ctx context.Context) {
	var b backoff
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			if retry != nil {
				continue
			}
		case <-retry:
		}
		retry = nil
		if s.flush(ctx) {
			retry = time.After(b.next())
		} else {
			b.reset()
		}
	}
}

// flush records every pending settlement, one write per run (the runs'
// writes issued concurrently), and reports whether some could not be
// recorded. An execution stays in the running set until its settlement
// is recorded, so a reconcile in between never mistakes it for an orphan.
// A settlement that failed for any reason but the run having moved on
// (which includes the loss of its lease) stays pending for the next
// attempt; the execution's log says so once.
func (s *Supervisor) flush(ctx context.Context) (failed bool) {
	s.mu.Lock()
	batch := s.pending
	s.pending = map[RunRef][]pendingSettlement{}
	s.mu.Unlock()
	refs := make([]RunRef, 0, len(batch))
	writes := make([]write, 0, len(batch))
	for ref, ps := range batch {
		ss := make([]Settlement, len(ps))
		for i, p := range ps {
			ss[i] = p.Settlement
		}
		refs = append(refs, ref)
		writes = append(writes, write{ref: ref, do: func(ctx context.Context) error { return s.ledger.Settle(ctx, ref, ss) }})
	}
	for i, err := range runWrites(ctx, writes) {
		if !s.settled(ctx, refs[i], batch[refs[i]], err) {
			failed = true
		}
	}
	return failed
}

// settled takes the outcome of recording a run's pending settlements ps:
// recorded (or moot), they leave the running set; else they are pending
// again. It reports whether they left.
func (s *Supervisor) settled(ctx context.Context, ref RunRef, ps []pendingSettlement, err error) bool {
	if err == nil || errors.Is(err, ErrStale) {
		for _, p := range ps {
			if err == nil && p.failures > 0 {
				s.ledger.Log(ref, p.ref, "info", "outcome recorded; the store accepts writes again")
			}
			s.forget(runExec{ref, p.Execution})
		}
		select {
		case s.freed <- struct{}{}:
		default:
		}
		return true
	}
	if ctx.Err() == nil {
		s.log.Error("engine: settle failed; retrying", "run", ref.RunID, "executions", len(ps), "err", err)
	}
	for i := range ps {
		if ps[i].failures == 0 && ctx.Err() == nil {
			s.ledger.Log(ref, ps[i].ref, "error", "outcome not recorded yet, retrying: "+err.Error())
		}
		ps[i].failures++
	}
	s.mu.Lock()
	s.pending[ref] = append(ps, s.pending[ref]...)
	s.mu.Unlock()
	return false
}
