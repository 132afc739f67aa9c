package capsule_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// errDiskFull is what a store that cannot write answers.
var errDiskFull = errors.New("database or disk is full")

// failingStore fails every write while failing is set, the way a full
// disk does, except the next allow writes.
type failingStore struct {
	store.Store
	failing atomic.Bool
	allow   atomic.Int32
}

func (f *failingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if f.failing.Load() && f.allow.Add(-1) < 0 {
		return errDiskFull
	}
	return f.Store.Update(ctx, fn)
}

// logSpy keeps the execution log lines the engine publishes.
type logSpy struct {
	engine.Ledger
	mu    sync.Mutex
	lines []string
}

func (l *logSpy) Log(ref engine.RunRef, execution, level, message string) {
	l.mu.Lock()
	l.lines = append(l.lines, execution+" "+level+" "+message)
	l.mu.Unlock()
	l.Ledger.Log(ref, execution, level, message)
}

func (l *logSpy) saw(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// TestFailedSettlementIsRetried: a step finishes while the store cannot
// write. Its settlement stays pending (the run keeps it in flight, and an
// unrelated commit does not turn it into a crash), the execution's log
// names the store error, and once the store writes again the worker's real
// outcome is recorded and the run succeeds.
func TestFailedSettlementIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &failingStore{Store: store.NewMemory()}
		spy := &logSpy{}
		e := start(t, capsule.Options{Store: st, WrapLedger: func(l engine.Ledger) engine.Ledger { spy.Ledger = l; return spy }})
		run := e.apply(spec(seq("main", sleepStep("nap", attempts(1)), succeedText("done")), "ms"), `{"text":"hi","ms":1000}`)
		synctest.Wait() // nap is dispatched and sleeping

		st.failing.Store(true)
		time.Sleep(time.Minute) // nap finishes; every attempt to record it fails
		synctest.Wait()
		if r := e.get(); r.Status.Phase != protocol.PhaseRunning || r.Status.Operational.InFlight != 1 {
			t.Fatalf("while the store cannot write: %s", mustJSON(t, r))
		}
		ref := *run.RunID + "/nap/1"
		if !spy.saw(ref + " error outcome not recorded yet, retrying: " + errDiskFull.Error()) {
			t.Errorf("the execution's log does not name the store error: %q", spy.lines)
		}

		st.failing.Store(false)
		e.update(false) // an unrelated commit wakes the supervisor at once
		time.Sleep(time.Minute)
		synctest.Wait()
		wantTerminal(t, e.get(), "succeeded", hi)
		es := e.history(*run.RunID)
		ends := es.of(protocol.EventNodeEnd, "nap")
		if len(ends) != 1 || ends[0].outcome(t).Status != "verified" || len(es.of(protocol.EventFault, "")) != 0 {
			t.Fatalf("the worker's outcome must be recorded:%s", es)
		}
	})
}

// TestFailedDispatchIsRetried: the store stops writing right after a step
// settles, so the next step's dispatch fails. Nothing else commits, yet
// the dispatch is tried again until the store writes again, and the run
// succeeds.
func TestFailedDispatchIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &failingStore{Store: store.NewMemory()}
		e := start(t, capsule.Options{Store: st})
		run := e.apply(spec(seq("main", sleepStep("one", attempts(1)), sleepStep("two", attempts(1)), succeedText("done")), "ms"), `{"text":"hi","ms":1000}`)
		synctest.Wait()
		st.allow.Store(1) // one's settlement
		st.failing.Store(true)
		time.Sleep(time.Minute)
		synctest.Wait()
		if r := e.get(); r.Status.Phase != protocol.PhaseRunning || r.Status.Operational.InFlight != 0 {
			t.Fatalf("while the store cannot write: %s", mustJSON(t, r))
		}
		st.failing.Store(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		wantTerminal(t, e.get(), "succeeded", hi)
		if es := e.history(*run.RunID); len(es.of(protocol.EventNodeEnd, "two")) != 1 {
			t.Fatalf("two must run once:%s", es)
		}
	})
}
