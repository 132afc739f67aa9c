package engine

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// missedWake is a one-run ledger with a change feed that never names the
// run and a Changed that never fires: only a full pass finds the run.
type missedWake struct {
	versioned
	mu         sync.Mutex
	runs       []RunRef
	dispatched int
}

func (m *missedWake) Changed() <-chan struct{} { return make(chan struct{}) }
func (m *missedWake) Changes(context.Context) ([]RunRef, bool, error) {
	return nil, false, nil
}
func (m *missedWake) Running(context.Context) ([]RunRef, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runs, nil
}
func (m *missedWake) Dispatch(context.Context, RunRef, []Dispatch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dispatched++
	return ErrGateClosed
}

func (m *missedWake) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dispatched
}

// TestSafetyNetCatchesAMissedWakeUp: a run the change feed never names,
// admitted without a wake-up, is found by the safety net's full pass, and
// only once the safety-net interval has passed.
func TestSafetyNetCatchesAMissedWakeUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &missedWake{versioned: versioned{version: 1}}
		s := New(l, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		synctest.Wait() // the first (full) pass found no run
		l.mu.Lock()
		l.runs = []RunRef{{Tenant: "t", RunID: "r"}}
		l.mu.Unlock()
		synctest.Wait()
		if n := l.count(); n != 0 {
			t.Fatalf("%d dispatches before any wake-up", n)
		}
		time.Sleep(DefaultSafetyNet)
		synctest.Wait()
		if n := l.count(); n != 1 {
			t.Fatalf("%d dispatches after the safety net", n)
		}
		cancel()
		<-done
	})
}

// feedOnly is a one-run ledger whose feed names the run once and whose
// listing never does: an incremental pass alone must reconcile it.
type feedOnly struct {
	missedWake
	changed chan struct{}
	named   []RunRef
	lists   int
}

func (f *feedOnly) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}
func (f *feedOnly) Changes(context.Context) ([]RunRef, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.named
	f.named = nil
	return n, false, nil
}
func (f *feedOnly) Running(context.Context) ([]RunRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	return nil, nil
}

// TestFeedAloneDrivesARun: a run the change feed names is claimed and
// reconciled by an incremental pass, with no further listing of the
// running runs.
func TestFeedAloneDrivesARun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &feedOnly{changed: make(chan struct{})}
		l.version = 1
		s := New(l, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		synctest.Wait()
		l.mu.Lock()
		l.named = []RunRef{{Tenant: "t", RunID: "r"}}
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
		synctest.Wait()
		if n := l.count(); n != 1 {
			t.Fatalf("%d dispatches for the run the feed named", n)
		}
		if l.lists != 1 {
			t.Fatalf("%d listings of the running runs; want only the first pass's", l.lists)
		}
		cancel()
		<-done
	})
}
