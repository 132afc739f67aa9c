package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/oecp/oecp/engine/reduce"
)

// maxConcurrentWrites bounds the ledger writes of one reconcile pass (or
// one settle flush) that are in flight at once.
const maxConcurrentWrites = 256

// A write is one ledger write decided for a run: a claim, a dispatch, a
// settlement, a crash, a void, a hold or a finish. The writes of one pass
// are for distinct runs, so they are issued concurrently, and a ledger
// that groups concurrent writes (runs.Backend) commits them together
// instead of one commit per run.
type write struct {
	ref RunRef
	msg string // what the log says when it fails
	do  func(ctx context.Context) error
}

// runWrites runs the writes concurrently, at most maxConcurrentWrites at a
// time, and returns their errors in order. Every write has returned when
// it returns.
func runWrites(ctx context.Context, ws []write) []error {
	errs := make([]error, len(ws))
	if len(ws) == 1 {
		errs[0] = ws[0].do(ctx)
		return errs
	}
	sem := make(chan struct{}, maxConcurrentWrites)
	var wg sync.WaitGroup
	for i := range ws {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = ws[i].do(ctx)
		}()
	}
	wg.Wait()
	return errs
}

// dispatch returns the write that records the batch, then starts a worker
// per execution. The batch's execution refs are numbered now, on the
// reconcile loop.
func (s *Supervisor) dispatch(snap *Snapshot, ds []reduce.Dispatch) write {
	ref := snap.Ref
	counts := s.executionCounts(snap)
	run := &finishing{spec: snap.Spec, seed: snap.Seed, native: snap.Native, memo: s.memo(ref)}
	batch := make([]Dispatch, len(ds))
	for i, d := range ds {
		counts[d.Occurrence.Node]++
		batch[i] = Dispatch{Dispatch: d, Ref: ExecutionRef(ref.RunID, d.Occurrence.Node, counts[d.Occurrence.Node])}
	}
	return write{ref: ref, msg: "engine: dispatch", do: func(ctx context.Context) error {
		// Each execution's attach stream opens before its dispatch
		// commits, so a client that sees the execution active can attach
		// to it at once.
		for _, d := range batch {
			s.ledger.ExecutionStarted(ref, d.Ref)
		}
		at := time.Now()
		if err := s.ledger.Dispatch(ctx, ref, batch); err != nil {
			for _, d := range batch {
				s.ledger.ExecutionEnded(ref, d.Ref)
			}
			if errors.Is(err, ErrGateClosed) {
				return nil
			}
			return err
		}
		for _, d := range batch {
			s.start(ctx, snap, d, at, run)
		}
		return nil
	}}
}
