package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultStallTimeout is how long an agent CLI's process may go without
// writing a line (an event on stdout or a line on stderr) before its turn
// is ended as stalled (oecp serve --agent-stall-timeout). Codex and Claude
// Code report every step of a turn, and retry a dropped provider
// connection within minutes, so ten silent minutes is a hang, not work; a
// command the agent runs that prints nothing for longer counts as no
// progress too.
const DefaultStallTimeout = 10 * time.Minute

// ErrStalled wraps a turn ended because its CLI wrote nothing for the
// stall timeout. It is neither continued nor retried: the outcome is a
// timeout.
var ErrStalled = errors.New("no output from the agent")

// errStalledCause is the cancellation cause of a stalled process.
var errStalledCause = errors.New("agent stalled")

// SetStallTimeout sets how long an agent CLI of the runners this
// configuration builds may stay silent before its turn ends (0: no
// bound). The default is DefaultStallTimeout.
func (c *Config) SetStallTimeout(d time.Duration) {
	if c == nil {
		return
	}
	c.stall, c.stallSet = max(d, 0), true
}

// stallTimeout is the configured stall timeout.
func (c *Config) stallTimeout() time.Duration {
	if c == nil || !c.stallSet {
		return DefaultStallTimeout
	}
	return c.stall
}

// watchdog ends a process that stays silent for d: progress re-arms it at
// every line, and stalled reports, after the process ended, whether the
// watchdog ended it. A zero d watches nothing.
type watchdog struct {
	d      time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	mu     sync.Mutex // stdout's and stderr's readers both re-arm it
	timer  *time.Timer
}

func newWatchdog(ctx context.Context, d time.Duration) *watchdog {
	w := &watchdog{d: d}
	w.ctx, w.cancel = context.WithCancelCause(ctx)
	if d > 0 {
		w.timer = time.AfterFunc(d, func() { w.cancel(errStalledCause) })
	}
	return w
}

func (w *watchdog) progress() {
	if w.timer != nil {
		w.mu.Lock()
		w.timer.Reset(w.d)
		w.mu.Unlock()
	}
}

// stop releases the watchdog and reports whether it ended the process
// (the caller's context had not ended first).
func (w *watchdog) stop(parent context.Context) (stalled bool) {
	if w.timer != nil {
		w.mu.Lock()
		w.timer.Stop()
		w.mu.Unlock()
	}
	stalled = parent.Err() == nil && errors.Is(context.Cause(w.ctx), errStalledCause)
	w.cancel(nil)
	return stalled
}

// stallError is the error of a process the watchdog ended.
func stallError(d time.Duration) error {
	return fmt.Errorf("%w for %s", ErrStalled, d)
}
