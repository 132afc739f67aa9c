package engine

import (
	"context"
	"errors"
	"time"

	"github.com/oecp/oecp/engine/worker"
)

// Recovery is the part of a Ledger that keeps what a restart needs to
// recover executions cleanly.
type Recovery interface {
	// RecordGroup records, without an event, the process group an
	// active execution's worker started. A later supervisor on the same
	// host that settles the execution as crash (a write fenced by its
	// claim of the run) then kills what is left of it (Snapshot.Groups),
	// before the run dispatches again.
	RecordGroup(ctx context.Context, ref RunRef, execution uint64, g worker.Group) error
	// Interrupt ends active executions that a graceful shutdown
	// cancelled. They neither failed nor succeeded: each gets a fault
	// naming it and is recorded interrupted (reduce.StateInterrupted),
	// so the same attempt is dispatched again after the restart.
	Interrupt(ctx context.Context, ref RunRef, executions []uint64) error
}

// KeepGroup records g, when set, as the process group of the active
// execution x (Snapshot.Groups).
func (s *Snapshot) KeepGroup(x uint64, g *worker.Group) {
	if g == nil {
		return
	}
	if s.Groups == nil {
		s.Groups = map[uint64]worker.Group{}
	}
	s.Groups[x] = *g
}

// orphanKillGrace bounds how long a supervisor waits for what is left of
// an orphan's process group to die before it settles the orphan anyway.
const orphanKillGrace = 5 * time.Second

// recordGroup records the process group an execution's worker started,
// once: a failure is logged, and only costs the cleanup after a crash.
func (s *Supervisor) recordGroup(ctx context.Context, ref RunRef, d Dispatch, pgid int) {
	g, err := worker.ProbeGroup(pgid)
	if err == nil {
		err = s.ledger.RecordGroup(ctx, ref, d.Execution, g)
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, ErrStale) {
		s.log.Warn("engine: record worker process group", "run", ref.RunID, "execution", d.Ref, "err", err)
	}
}

// killLeft kills what is left of the orphans' process groups (started by a
// process that died without cleaning up) so that no orphan runs on while
// its retry starts. It runs only once the orphans' crash committed under
// this process's claim of the run: a process that lost the run never
// kills what the run's owner runs. A group is identified by more than its
// id (worker.Group.KillLeft: the host's boot id and the leader's start
// time), so a reused process group id is never killed.
func (s *Supervisor) killLeft(ctx context.Context, snap *Snapshot, orphans []uint64) {
	for _, x := range orphans {
		g, ok := snap.Groups[x]
		if !ok {
			continue
		}
		kctx, cancel := context.WithTimeout(ctx, orphanKillGrace)
		n, err := g.KillLeft(kctx)
		cancel()
		if n > 0 {
			s.log.Info("engine: killed the processes an orphaned execution left", "run", snap.Ref.RunID, "execution", x, "pgid", g.PGID, "processes", n)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("engine: kill an orphaned execution's processes", "run", snap.Ref.RunID, "execution", x, "pgid", g.PGID, "err", err)
		}
	}
}

// recordInterrupts records the executions a graceful shutdown cancelled
// as interrupted. If the write fails, they stay active and the next
// supervisor settles them as crash.
func (s *Supervisor) recordInterrupts(ctx context.Context) {
	s.mu.Lock()
	batch := s.interrupted
	s.interrupted = map[RunRef][]uint64{}
	s.mu.Unlock()
	for ref, xs := range batch {
		if err := s.ledger.Interrupt(ctx, ref, xs); err != nil && !errors.Is(err, ErrStale) {
			s.log.Error("engine: record interrupted executions", "run", ref.RunID, "executions", len(xs), "err", err)
		}
	}
}
