package engine

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/graph"
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
	// run decides the run's terminal at the settlement (SettleFinisher).
	run *finishing
}

// SettleFinisher is an optional Ledger extension. SettleFinish is Settle,
// and, when the settlements leave the run with no active execution and
// decide returns a terminal for the run's history after them, it also
// finishes the run with that terminal in the same transaction (finished
// reports it). So a run whose last execution settles ends in that
// settlement's commit, without a reconcile pass and a commit of its own,
// and its execution slot serves the next run at once.
type SettleFinisher interface {
	SettleFinish(ctx context.Context, ref RunRef, ss []Settlement, decide func(reduce.History) *reduce.Terminal) (finished bool, err error)
}

// finishing is what deciding a run's terminal at a settlement takes: the
// run's graph, seed and reducer mode as its dispatch saw them, and its
// reducer memo.
type finishing struct {
	spec   *graph.GraphSpec
	seed   json.RawMessage
	native bool
	memo   *runMemo
}

// runMemo is a run's reducer memo and the lock that serializes the run's
// reductions: the reconcile loop's and those deciding its terminal at a
// settlement (which run inside the settlement's store transaction).
type runMemo struct {
	mu sync.Mutex
	m  *reduce.Memo
	// ended is the number of ended executions in the history m last
	// reduced. A memo must only see histories that extend each other, and
	// executions only ever end, so a history with fewer is older than one
	// m has seen — a settlement's reduction runs before its write commits,
	// the write may fail, and a reconcile pass may hold a snapshot read
	// before it — and is reduced with a fresh memo.
	ended int
}

// reduce folds the history h of a run of graph g and seed in the given
// reducer mode.
func (r *runMemo) reduce(g *graph.GraphSpec, seed json.RawMessage, h reduce.History, native bool) (reduce.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := endedIn(h)
	if r.m == nil || n < r.ended {
		r.m = &reduce.Memo{}
	}
	r.ended = n
	if native {
		return reduce.ReduceNativeWith(g, seed, h, r.m)
	}
	return reduce.ReduceWith(g, seed, h, r.m)
}

// endedIn counts the ended executions of h.
func endedIn(h reduce.History) int {
	n := len(h.Ended)
	for _, x := range h.Executions {
		if x.State != reduce.StateActive {
			n++
		}
	}
	return n
}

// terminal is the terminal a reconcile pass would finish a run with
// history: the reducer's terminal when no execution is active and the
// reduction voids nothing. It is nil for anything else (an active
// execution, a reducer error, a void, more work), which a reconcile pass
// decides.
func (f *finishing) terminal(h reduce.History) *reduce.Terminal {
	for _, x := range h.Executions {
		if x.State == reduce.StateActive {
			return nil
		}
	}
	res, err := f.memo.reduce(f.spec, f.seed, h, f.native)
	if err != nil || len(res.Voids()) > 0 {
		return nil
	}
	return res.Terminal
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
		writes = append(writes, write{ref: ref, do: s.settleWrite(ref, ss, ps[0].run)})
	}
	for i, err := range runWrites(ctx, writes) {
		if !s.settled(ctx, refs[i], batch[refs[i]], err) {
			failed = true
		}
	}
	return failed
}

// settleWrite records a run's settlements, finishing the run in the same
// transaction when they end it and the ledger can (SettleFinisher).
func (s *Supervisor) settleWrite(ref RunRef, ss []Settlement, run *finishing) func(ctx context.Context) error {
	sf, ok := s.ledger.(SettleFinisher)
	if !ok || run == nil {
		return func(ctx context.Context) error { return s.ledger.Settle(ctx, ref, ss) }
	}
	return func(ctx context.Context) error {
		var t *reduce.Terminal
		finished, err := sf.SettleFinish(ctx, ref, ss, func(h reduce.History) *reduce.Terminal {
			t = run.terminal(h)
			return t
		})
		if err == nil && finished {
			traceFinished(ref, *t)
		}
		if err == nil && finished && s.obs != nil {
			s.obs.RunFinished(string(t.Status))
		}
		return err
	}
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
		s.markDirty(ref)
		select {
		case s.freed <- struct{}{}:
		default:
		}
		return true
	}
	if ctx.Err() == nil {
		s.logError("engine: settle failed; retrying", "run", ref.RunID, "executions", len(ps), "err", err)
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
