package engine

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
)

// settling is a one-run ledger whose dispatches commit and whose
// settlements are recorded.
type settling struct {
	versioned
	mu      sync.Mutex
	settled []Settlement
}

func (l *settling) Changed() <-chan struct{}                           { return make(chan struct{}) }
func (l *settling) Dispatch(context.Context, RunRef, []Dispatch) error { return nil }
func (l *settling) Log(RunRef, string, string, string)                 {}
func (l *settling) Settle(_ context.Context, _ RunRef, ss []Settlement) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.settled = append(l.settled, ss...)
	return nil
}

// finishAtShutdown is a worker that finishes with a result just as the
// shutdown cancels it: it answers verified once its context is done.
type finishAtShutdown struct{ started chan struct{} }

func (w finishAtShutdown) Run(ctx context.Context, _ worker.Execution) worker.Outcome {
	close(w.started)
	<-ctx.Done()
	return worker.Outcome{Status: "verified", Output: json.RawMessage("null")}
}

// TestResultAtShutdownIsSettledNotInterrupted: a worker that returned a
// result when a graceful shutdown came is settled with that result; only
// a worker the shutdown made fail is interrupted (and run again later), so
// a finished side effect is never repeated.
func TestResultAtShutdownIsSettledNotInterrupted(t *testing.T) {
	l := &settling{versioned: versioned{version: 1}}
	reg := worker.NewRegistry()
	w := finishAtShutdown{started: make(chan struct{})}
	if err := reg.Add("w@1", w); err != nil {
		t.Fatal(err)
	}
	s := New(l, reg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	testkit.Recv(t, w.started)
	cancel()
	testkit.Recv(t, done)
	if len(l.settled) != 1 || l.settled[0].Outcome.Status != "verified" {
		t.Fatalf("settled %+v", l.settled)
	}
	if len(s.interrupted) != 0 {
		t.Fatalf("interrupted %v", s.interrupted)
	}
}
