package runs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs/logbuf"
	"github.com/oecp/oecp/store"
)

// Terminal reasons of a run whose workspace could not be made.
const (
	ReasonRevisionNotFound   = "revision_not_found"
	ReasonRuntimeUnavailable = "runtime_unavailable"
	// ReasonRuntimeLost ends a run whose executions started with a
	// workspace this host does not hold (see WorkspaceKeeper).
	ReasonRuntimeLost = "runtime_lost"
)

// errWorkspaceLost is the preparation failure of a lost workspace.
var errWorkspaceLost = errors.New("the run's workspace was on a server that is gone")

// workspaceFailure is what a run's log says of a workspace that could not
// be made.
const workspaceFailure = "the repository could not be cloned at the requested revision"

// Workspace states of a run in this process.
const (
	wsPreparing = iota + 1
	wsReady
	wsLost // started elsewhere, workspace not here: being ended runtime_lost
)

// preparations tracks the workspaces this process is making or has made.
// A run's first Snapshot after it was admitted (or after a restart)
// starts Prepare on its own goroutine; the run dispatches nothing until
// Prepare succeeded, which a run-wide log line records (that commit wakes
// the supervisor), or fails, which finishes the run.
type preparations struct {
	mu     sync.Mutex
	state  map[runKey]int
	epoch  map[runKey]uint64 // the claim each state was reached under
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// forgets counts the states forgotten (closed runs'); a reading
	// taken before it moved may predate a run's close (mark).
	forgets atomic.Uint64
}

// mark is taken before a reading of a run that may reach workspaceReady.
func (p *preparations) mark() uint64 { return p.forgets.Load() }

// workspaceReady reports whether the run may dispatch, starting its
// workspace when it is not being made yet. started says the run has
// executions already: its workspace must then be the one they used. With
// a Checkpointer it is rebuilt from the source and the run's latest
// checkpoint (on this host too: the work of an execution that did not end
// is dropped, as that execution runs again). Without one, lost reports
// that this host does not hold it — the run is being ended runtime_lost
// and must not be reduced meanwhile (its orphans would otherwise settle
// and the graph go on without its workspace).
//
// epoch is the run's claim: a workspace made under an earlier claim of
// this process (it lost the run to another replica and took it back) is
// rebuilt, as the other replica may have moved the run on. readAt is the
// mark (preparations.mark) taken as the reading of the run began.
func (b *Backend) workspaceReady(k runKey, src Source, started bool, epoch, readAt uint64) (ready, lost bool) {
	if b.cfg.Workspaces == nil {
		return true, false
	}
	p := &b.prep
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		p.state, p.epoch = map[runKey]int{}, map[runKey]uint64{}
	}
	if _, restores := b.cfg.Workspaces.(Checkpointer); restores && started && p.state[k] == wsReady && p.epoch[k] != epoch {
		delete(p.state, k)
	}
	switch p.state[k] {
	case wsReady:
		return true, false
	case wsPreparing:
		return false, false
	case wsLost:
		return false, true
	}
	if p.ctx == nil {
		p.ctx, p.cancel = context.WithCancel(context.Background())
	}
	kp, keeps := b.cfg.Workspaces.(WorkspaceKeeper)
	cp, restores := b.cfg.Workspaces.(Checkpointer)
	restore := started && restores
	lost = started && !restores && keeps && !kp.Prepared(k.tk, k.runID, src)
	p.state[k], p.epoch[k] = wsPreparing, epoch
	if lost {
		p.state[k] = wsLost
	}
	set := p.state[k]
	// A state forgotten since the reading began may be this run's: it
	// may have finished meanwhile.
	stale := p.forgets.Load() != readAt
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if stale && b.finishedRun(p.ctx, k) {
			p.abandon(k, set)
			b.seeds.drop(k) // the stale reading kept its submission again
			return
		}
		var err error
		switch {
		case lost:
			err = errWorkspaceLost
		case restore:
			err = b.restoreWorkspace(p.ctx, cp, k, src)
		default:
			err = b.cfg.Workspaces.Prepare(p.ctx, k.tk, k.runID, src)
		}
		b.prepared(p.ctx, k, src, restore, err)
	}()
	return false, lost
}

// prepared records how the making (or, restore, the rebuilding) of the
// run's workspace went: a run whose workspace is lost or cannot be
// rebuilt ends runtime_lost.
func (b *Backend) prepared(ctx context.Context, k runKey, src Source, restore bool, err error) {
	if ctx.Err() != nil {
		return // shutting down: the next process prepares it again
	}
	// What follows is written only while this process still holds the
	// run under the claim it prepared the workspace for.
	b.prep.mu.Lock()
	fence := store.FenceOf(store.RunLease(k.tk, k.runID), b.prep.epoch[k])
	b.prep.mu.Unlock()
	if err == nil && restore {
		b.logBeforeWrite(k.tk, k.runID, fence, "workspace: rebuilt from "+src.Repository+" at "+src.Revision+
			" and the run's latest checkpoint; an execution that was running runs again, and agent sessions start over")
	}
	if err == nil {
		b.prep.mu.Lock()
		current := b.prep.state[k] == wsPreparing // else the run finished meanwhile
		if current {
			b.prep.state[k] = wsReady
		}
		b.prep.mu.Unlock()
		if current {
			// The run may dispatch now; its dispatch carries the line.
			b.logBeforeWrite(k.tk, k.runID, fence, "workspace: "+src.Repository+" at "+src.Revision+" is ready")
			b.changes.Changed(k.ref())
		} else {
			// The run finished while its clone was landing: it is closed
			// again, so the clone is marked finished and removed too.
			b.closeRun(k.tk, k.runID)
		}
		return
	}
	reason := ReasonRuntimeUnavailable
	var re *RestoreError
	switch {
	case errors.As(err, &re):
		reason = ReasonRuntimeLost
	case errors.Is(err, ErrRevisionNotFound):
		reason = ReasonRevisionNotFound
	case errors.Is(err, errWorkspaceLost):
		reason = ReasonRuntimeLost
	}
	// The details (URL, paths, git's words) stay in the server's log; the
	// tenant reads a fixed sentence.
	b.cfg.Log.Warn("runs: workspace failed, the run fails", "run", k.runID, "reason", reason, "err", err)
	crash := errorOutcome(worker.CodeCrash, worker.ReasonDeclaredFailure)
	note := "workspace: " + workspaceFailure
	switch {
	case re != nil:
		note = "workspace: the run's workspace cannot be rebuilt on this server: " + re.Why
	case reason == ReasonRuntimeLost:
		note = "workspace: " + errWorkspaceLost.Error()
	}
	err = b.update(ctx, k.tk, k.runID, func(tx store.Tx, st *runState) error {
		if st.Phase == PhaseFinished {
			return nil
		}
		if err := fence.Check(tx); err != nil {
			return err // the run is another process's now: it decides
		}
		line := logbuf.Line{Record: protocol.LogRecord{Level: "error", Target: logTarget, Message: SafeText(note, protocol.RedactedLogMessage)}}
		if err := appendLogs(tx, k.tk, k.runID, st, []logbuf.Line{line}); err != nil {
			return err
		}
		return stopRun(tx, k.tk, k.runID, st, crash, protocol.TerminalResult{Status: "failed", Reason: reason})
	})
	if err != nil && !errors.Is(err, store.ErrLeaseLost) {
		b.cfg.Log.Error("runs: cannot fail the run", "run", k.runID, "err", err)
	}
	b.closeRun(k.tk, k.runID)
}

// finishedRun reports whether the run is finished (or gone) in the store
// now. A reading taken before the run's finishing commit reaches
// workspaceReady after that commit closed the run and forgot its state,
// and would make (or, its executions having started, rebuild, or find
// lost and fail) the workspace of a run that needs none: a preparation
// whose reading began before a run was closed here (preparations.mark)
// reads the run again first. A failed read reports false; the
// preparation goes on.
func (b *Backend) finishedRun(ctx context.Context, k runKey) bool {
	finished := false
	err := b.store.View(ctx, func(tx store.ReadTx) error {
		st, _, ok, err := loadRun(tx, k.tk, k.runID)
		finished = err == nil && (!ok || st.Phase == PhaseFinished)
		return err
	})
	return err == nil && finished
}

// abandon drops the state set (wsPreparing or wsLost) of a preparation
// that did not start, unless another state replaced it meanwhile.
func (p *preparations) abandon(k runKey, set int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state[k] == set {
		delete(p.state, k)
		delete(p.epoch, k)
	}
}

// forget drops a finished run's workspace state.
func (p *preparations) forget(k runKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.state, k)
	delete(p.epoch, k)
	p.forgets.Add(1)
}

// stop cancels the preparations in flight and waits for them.
func (p *preparations) stop() {
	p.mu.Lock()
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
