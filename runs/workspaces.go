package runs

import (
	"context"
	"errors"
	"sync"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// Terminal reasons of a run whose workspace could not be made.
const (
	ReasonRevisionNotFound   = "revision_not_found"
	ReasonRuntimeUnavailable = "runtime_unavailable"
)

// workspaceFailure is what a run's log says of a workspace that could not
// be made.
const workspaceFailure = "the repository could not be cloned at the requested revision"

// Workspace states of a run in this process.
const (
	wsPreparing = iota + 1
	wsReady
)

// preparations tracks the workspaces this process is making or has made.
// A run's first Snapshot after it was admitted (or after a restart)
// starts Prepare on its own goroutine; the run dispatches nothing until
// Prepare succeeded, which a run-wide log line records (that commit wakes
// the supervisor), or fails, which finishes the run.
type preparations struct {
	mu     sync.Mutex
	state  map[runKey]int
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// workspaceReady reports whether the run may dispatch, starting its
// workspace when it is not being made yet.
func (b *Backend) workspaceReady(k runKey, src Source) bool {
	if b.cfg.Workspaces == nil {
		return true
	}
	p := &b.prep
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		p.state = map[runKey]int{}
	}
	switch p.state[k] {
	case wsReady:
		return true
	case wsPreparing:
		return false
	}
	if p.ctx == nil {
		p.ctx, p.cancel = context.WithCancel(context.Background())
	}
	p.state[k] = wsPreparing
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		b.prepare(p.ctx, k, src)
	}()
	return false
}

// prepare makes the run's workspace and records how that went.
func (b *Backend) prepare(ctx context.Context, k runKey, src Source) {
	err := b.cfg.Workspaces.Prepare(ctx, k.tk, k.runID, src)
	if ctx.Err() != nil {
		return // shutting down: the next process prepares it again
	}
	if err == nil {
		b.prep.mu.Lock()
		current := b.prep.state[k] == wsPreparing // else the run finished meanwhile
		if current {
			b.prep.state[k] = wsReady
		}
		b.prep.mu.Unlock()
		if current {
			b.log(k.tk, k.runID, "", "info", "workspace: "+src.Repository+" at "+src.Revision+" is ready")
		} else {
			// The run finished while its clone was landing: it is closed
			// again, so the clone is marked finished and removed too.
			b.closeRun(k.tk, k.runID)
		}
		return
	}
	reason := ReasonRuntimeUnavailable
	if errors.Is(err, ErrRevisionNotFound) {
		reason = ReasonRevisionNotFound
	}
	// The details (URL, paths, git's words) stay in the server's log; the
	// tenant reads a fixed sentence.
	b.cfg.Log.Warn("runs: workspace failed, the run fails", "run", k.runID, "reason", reason, "err", err)
	crash := errorOutcome(worker.CodeCrash, worker.ReasonDeclaredFailure)
	note := "workspace: " + workspaceFailure
	err = b.update(ctx, k.tk, k.runID, func(tx store.Tx, st *runState) error {
		if st.Phase == PhaseFinished {
			return nil
		}
		line := logLine{record: protocol.LogRecord{Level: "error", Target: logTarget, Message: SafeText(note, protocol.RedactedLogMessage)}}
		if err := appendLogs(tx, k.tk, k.runID, st, []logLine{line}); err != nil {
			return err
		}
		return stopRun(tx, k.tk, k.runID, st, crash, protocol.TerminalResult{Status: "failed", Reason: reason})
	})
	if err != nil {
		b.cfg.Log.Error("runs: cannot fail the run", "run", k.runID, "err", err)
	}
	b.closeRun(k.tk, k.runID)
}

// forget drops a finished run's workspace state.
func (p *preparations) forget(k runKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.state, k)
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
