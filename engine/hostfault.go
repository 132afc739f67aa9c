package engine

import (
	"context"
	"errors"
	"time"
)

// HostFaults is the part of a Ledger that records executions that their
// host could not start (worker.Outcome.HostFault: a full disk, a sandbox
// that could not be set up) as interrupted rather than failed, so the
// same attempt runs again. When it cannot record them, such an execution
// settles with its outcome (crash) and spends its attempt.
type HostFaults interface {
	// Unstarted records the executions interrupted, after a log line on
	// each that names why.
	Unstarted(ctx context.Context, ref RunRef, executions []uint64, why string) error
}

// A run whose execution its host could not start waits before the same
// node is dispatched again: hostRetryMin at first, doubling up to
// hostRetryMax while the host keeps failing, so that a full disk is not
// retried in a loop.
const (
	hostRetryMin = 2 * time.Second
	hostRetryMax = time.Minute
)

// hostHold is a run's wait after a host fault.
type hostHold struct {
	until time.Time
	wait  time.Duration
}

// hostFault records an execution its host could not start as interrupted
// and holds its run back for the backoff; it reports false when the
// record fails (the caller then settles the outcome).
// The execution stays in the running set until its record commits, so a
// reconcile in between never mistakes it for an orphan.
func (s *Supervisor) hostFault(ctx context.Context, ref RunRef, key runExec, xref, why string) bool {
	s.mu.Lock()
	h := s.hostHolds[ref]
	h.wait = min(max(2*h.wait, hostRetryMin), hostRetryMax)
	h.until = time.Now().Add(h.wait)
	s.hostHolds[ref] = h
	s.mu.Unlock()
	s.logError("engine: the host could not start an execution; its attempt is not spent", "run", ref.RunID, "execution", xref, "why", why, "retryIn", h.wait)
	if err := s.ledger.Unstarted(ctx, ref, []uint64{key.exec}, why); err != nil {
		if ctx.Err() == nil && !errors.Is(err, ErrStale) {
			s.logError("engine: record an execution its host could not start", "run", ref.RunID, "err", err)
		}
		return false
	}
	s.forget(key)
	s.markDirty(ref)
	time.AfterFunc(h.wait, func() {
		s.markDirty(ref)
		select {
		case s.freed <- struct{}{}:
		default:
		}
	})
	return true
}

// heldByHost reports whether ref waits after a host fault.
func (s *Supervisor) heldByHost(ref RunRef) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hostHolds[ref]
	return ok && time.Now().Before(h.until)
}

// hostStarted ends ref's host backoff: one of its executions ran.
func (s *Supervisor) hostStarted(ref RunRef) {
	s.mu.Lock()
	delete(s.hostHolds, ref)
	s.mu.Unlock()
}
