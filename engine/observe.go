package engine

import (
	"context"
	"time"

	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
)

// Observer sees what the supervisor does (metrics). Its methods are
// called from the reconcile loop and the worker goroutines; they must not
// block. Every label it receives is bounded: outcomes are a closed set
// and workers are named only when they are built-ins or host-configured
// (a closed set); see WorkerLabel.
type Observer interface {
	// RunsActive is the number of running runs at a reconcile pass.
	RunsActive(n int)
	// RunFinished is one run this supervisor finished, by terminal status.
	RunFinished(status string)
	// ExecutionStarted is one worker started, wait after its dispatch was
	// recorded.
	ExecutionStarted(worker string, wait time.Duration)
	// ExecutionEnded is one worker returned: outcome is "ok", an error
	// code (timeout, crash, malformed, refusal, error) or "cancelled"
	// (voided, or the supervisor stopped) when it is not settled.
	ExecutionEnded(worker, outcome string)
}

// SetObserver makes o see the supervisor's runs and executions. Call it
// before Run.
func (s *Supervisor) SetObserver(o Observer) { s.obs = o }

// Worker labels for executions whose worker is not a registered one.
const (
	WorkerNative = "native" // a native run's plan-bound node (an agent)
	WorkerOther  = "other"  // a reference no registered worker answers
)

// workerLabel is the bounded name of an execution's worker.
func (s *Supervisor) workerLabel(snap *Snapshot, d reduce.Dispatch) string {
	if snap.Worker != nil {
		return WorkerNative
	}
	if _, ok := s.workers.Lookup(d.Worker); ok {
		return d.Worker
	}
	return WorkerOther
}

// outcomeLabel is the bounded name of an outcome.
func outcomeLabel(o worker.Outcome) string {
	if !o.IsError() {
		return "ok"
	}
	switch o.Code {
	case worker.CodeTimeout, worker.CodeCrash, worker.CodeMalformed, worker.CodeRefusal:
		return o.Code
	}
	return "error"
}

// finish settles a run and reports it.
func (s *Supervisor) finish(ctx context.Context, ref RunRef, t reduce.Terminal) error {
	err := s.ledger.Finish(ctx, ref, t)
	if err == nil {
		traceFinished(ref, t)
	}
	if err == nil && s.obs != nil {
		s.obs.RunFinished(string(t.Status))
	}
	return err
}

// observeEnded reports a worker that returned with outcome: cancelled
// when it is not settled — a graceful shutdown interrupted it (ctx, an
// error outcome) or its execution was voided (wctx without a timeout) —
// else its outcome's label.
func (s *Supervisor) observeEnded(ctx, wctx context.Context, worker string, o result) {
	if s.obs == nil {
		return
	}
	ended := outcomeLabel(o.Outcome)
	if (ctx.Err() != nil && o.IsError()) || (wctx.Err() != nil && ctx.Err() == nil && !o.timedOut) {
		ended = "cancelled"
	}
	s.obs.ExecutionEnded(worker, ended)
}
