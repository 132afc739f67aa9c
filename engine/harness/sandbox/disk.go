package sandbox

import (
	"errors"
	"time"

	"github.com/oecp/oecp/internal/diskusage"
)

// diskPollInterval is how often an execution's directories are measured
// against --agent-max-disk: an agent may overshoot the bound by what it
// writes in that time.
const diskPollInterval = 2 * time.Second

// diskWalkSpacing makes the next measurement wait at least this many times
// as long as the last walk took, so measuring a large tree costs at most a
// tenth of one core.
const diskWalkSpacing = 9

// watchDisk measures roots at once, then every diskPollInterval (spaced
// by diskWalkSpacing times the last walk), until stop is closed or the
// trees are over limit: then over is called once, with what was measured
// and why (nil: the bytes). It closes done when it returns.
func watchDisk(roots []string, limit int64, stop <-chan struct{}, done chan<- struct{}, over func(bytes int64, why error)) {
	defer close(done)
	for {
		start := time.Now()
		n, err := diskusage.Measure(roots, limit, stop)
		if errors.Is(err, diskusage.ErrStopped) {
			return
		}
		if err != nil || n > limit {
			over(n, err)
			return
		}
		wait := max(diskPollInterval, diskWalkSpacing*time.Since(start))
		t := time.NewTimer(wait)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// watchDisk ends the execution (LimitDisk) once its run's workspace, git
// directory and its home together take more than --agent-max-disk, or
// hold more than the walk may visit. A verifier is measured too: its home
// is on disk, and a run already over its bound runs nothing more in it.
func (e *Execution) watchDisk() {
	limit := e.h.cfg.MaxDisk
	roots := []string{e.spec.Workspace, e.spec.GitDir, e.spec.Home}
	e.diskStop, e.diskDone = make(chan struct{}), make(chan struct{})
	go watchDisk(roots, limit, e.diskStop, e.diskDone, func(n int64, why error) {
		if why != nil {
			e.h.log.Warn("sandbox: an execution's directories are over --agent-max-disk", "run", e.spec.Run, "why", why.Error(), "limit", limit)
		} else {
			e.h.log.Warn("sandbox: an execution's directories are over --agent-max-disk", "run", e.spec.Run, "bytes", n, "limit", limit)
		}
		e.hitLimit(LimitDisk)
	})
}

// stopDisk ends the disk watch and waits for it.
func (e *Execution) stopDisk() {
	if e.diskStop != nil {
		close(e.diskStop)
		<-e.diskDone
		e.diskStop = nil
	}
}
