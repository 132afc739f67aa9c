package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/server"
)

// A server with --idle-exit D ends itself, as SIGTERM would end it, once
// it has had no open connection and no unfinished run for D: the local
// server the CLI starts in the background (local_server.go) goes away
// when nobody uses it. A run that is still going keeps it serving,
// however long nobody watches. Connections are counted by a server
// observer; unfinished runs are the count the engine reports at each of
// its passes (every change, and every few seconds anyway).

// idleCheckMax bounds the interval at which the idle clock is checked.
const idleCheckMax = time.Second

// idleWatch tracks connections and unfinished runs.
type idleWatch struct {
	mu    sync.Mutex
	conns int
	runs  int
	last  time.Time // when the server was last seen busy
	now   func() time.Time
}

func newIdleWatch() *idleWatch {
	w := &idleWatch{now: time.Now}
	w.last = w.now()
	return w
}

// busy reports whether a connection is open or a run unfinished, and
// records the time when so.
func (w *idleWatch) busy() (bool, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conns > 0 || w.runs > 0 {
		w.last = w.now()
		return true, w.last
	}
	return false, w.last
}

func (w *idleWatch) add(conns int) {
	w.mu.Lock()
	w.conns += conns
	w.last = w.now()
	w.mu.Unlock()
}

// Open counts a connection until its Closed (server.Observer).
func (w *idleWatch) Open(server.ConnInfo) server.ConnObserver {
	w.add(1)
	return idleConn{w}
}

// idleConn sees one connection's end; its other events change nothing.
type idleConn struct{ w *idleWatch }

func (idleConn) Request(server.RequestInfo) {}
func (idleConn) Refused(server.Refusal)     {}
func (idleConn) Cancel(bool)                {}
func (idleConn) Subscribed(int)             {}
func (idleConn) Unsubscribed(int)           {}
func (idleConn) Delivered(int)              {}
func (idleConn) SlowConsumer(int)           {}
func (c idleConn) Closed(server.ConnStats)  { c.w.add(-1) }

// engineObserver is next (nil: none) with the engine's count of
// unfinished runs also recorded by w.
func (w *idleWatch) engineObserver(next engine.Observer) engine.Observer {
	return idleRuns{w: w, next: next}
}

type idleRuns struct {
	w    *idleWatch
	next engine.Observer
}

func (o idleRuns) RunsActive(n int) {
	o.w.mu.Lock()
	if n > 0 || o.w.runs > 0 {
		o.w.last = o.w.now() // busy, or idle from now on
	}
	o.w.runs = n
	o.w.mu.Unlock()
	if o.next != nil {
		o.next.RunsActive(n)
	}
}

func (o idleRuns) RunFinished(status string) {
	if o.next != nil {
		o.next.RunFinished(status)
	}
}

func (o idleRuns) ExecutionStarted(worker string, wait time.Duration) {
	if o.next != nil {
		o.next.ExecutionStarted(worker, wait)
	}
}

func (o idleRuns) ExecutionEnded(worker, outcome string) {
	if o.next != nil {
		o.next.ExecutionEnded(worker, outcome)
	}
}

// run calls stop once the server has been idle for d, or returns when ctx
// ends.
func (w *idleWatch) run(ctx context.Context, d time.Duration, stop func(), log *slog.Logger) {
	t := time.NewTicker(min(max(d/4, time.Millisecond), idleCheckMax))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if busy, since := w.busy(); !busy && w.now().Sub(since) >= d {
			log.Info("idle: no connection and no unfinished run, stopping (--idle-exit)", "idle", d.String())
			stop()
			return
		}
	}
}

// idleExit prepares --idle-exit: nil without it (or a usage error). The
// watch observes the engine through cfg.backend and the connections
// through the returned watch, which serve adds to its observers.
func (cfg *serveConfig) idleExitWatch() (*idleWatch, error) {
	switch {
	case cfg.idleExit < 0:
		return nil, failf("serve", exitUsage, "--idle-exit %v: want a positive duration, or 0 to serve until stopped", cfg.idleExit)
	case cfg.idleExit == 0:
		return nil, nil
	case cfg.stdio:
		return nil, failf("serve", exitUsage, "--idle-exit applies to the WebSocket listener: --stdio ends at EOF")
	}
	w := newIdleWatch()
	cfg.backend.wrapObserver = w.engineObserver
	return w, nil
}

// start runs the watch (w may be nil) under ctx; the context returned
// ends when ctx does or when the server has been idle for d.
func (w *idleWatch) start(ctx context.Context, d time.Duration, log *slog.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if w != nil {
		go w.run(ctx, d, cancel, log)
	}
	return ctx, cancel
}
