package runs_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
)

// listCounting is a native ledger that counts the supervisor's full
// passes (its listings of every unfinished run).
type listCounting struct {
	*runs.Ledger
	lists atomic.Int64
}

func (l *listCounting) Running(ctx context.Context) ([]engine.RunRef, error) {
	l.lists.Add(1)
	return l.Ledger.Running(ctx)
}

// TestQueuedRunStartsWhenASlotFreesWithoutAFullPass: with one execution
// slot, a run submitted while another holds it waits; when the slot frees
// it starts and finishes, and the supervisor never lists the unfinished
// runs again after its first pass: the submission, the settlement and
// the freed slot drive it.
func TestQueuedRunStartsWhenASlotFreesWithoutAFullPass(t *testing.T) {
	agents := newFakeAgents()
	b := runs.New(runs.Config{Store: store.NewMemory(), Agents: agents, Log: slog.New(slog.DiscardHandler)})
	defer b.Close()
	l := &listCounting{Ledger: b.Ledger("test-owner")}
	sup := engine.New(l, worker.NewRegistry(), slog.New(slog.DiscardHandler))
	sup.SetMaxActive(1)
	sup.SetSafetyNet(time.Hour) // no safety-net pass within the test
	stop := runSupervisor(t, sup)
	defer stop()
	ctx := as("alice")
	if _, err := b.Submit(ctx, "first", oneStep("first", "block")); err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, agents.started)
	lists := l.lists.Load()
	if _, err := b.Submit(ctx, "second", oneStep("second", "echo")); err != nil {
		t.Fatal(err)
	}
	close(agents.release)
	for _, id := range []string{"first", "second"} {
		if got := statusJSON(t, waitFinished(t, b, ctx, id)); got != `{"phase":"finished","terminalResult":{"status":"succeeded","output":null}}` {
			t.Fatalf("%s: %s", id, got)
		}
	}
	if n := l.lists.Load(); n != lists || n != 1 {
		t.Fatalf("%d full passes (%d when the first run started); want only the first", n, lists)
	}
}

// TestRunSubmittedOnAnotherReplicaIsPickedUp: two replicas on one
// PostgreSQL schema, only one of them supervising (its safety net out of
// the way). A run admitted by the other replica — a commit the
// supervising one did not make — is picked up, run and finished.
func TestRunSubmittedOnAnotherReplicaIsPickedUp(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	open := func() store.Store {
		st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn, LeaseTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	agentsA := newFakeAgents()
	a := runs.New(runs.Config{Store: open(), Agents: agentsA, Log: slog.New(slog.DiscardHandler)})
	defer a.Close()
	l := &listCounting{Ledger: a.Ledger("replica-a")}
	sup := engine.New(l, worker.NewRegistry(), slog.New(slog.DiscardHandler))
	sup.SetSafetyNet(time.Hour)
	stop := runSupervisor(t, sup)
	defer stop()
	b := runs.New(runs.Config{Store: open(), Agents: newFakeAgents(), Log: slog.New(slog.DiscardHandler)})
	defer b.Close()
	ctx := as("alice")
	if _, err := b.Submit(ctx, "elsewhere", oneStep("elsewhere", "echo")); err != nil {
		t.Fatal(err)
	}
	if got := statusJSON(t, waitFinished(t, b, ctx, "elsewhere")); got != `{"phase":"finished","terminalResult":{"status":"succeeded","output":null}}` {
		t.Fatalf("final %s", got)
	}
	agentsA.mu.Lock()
	defer agentsA.mu.Unlock()
	if agentsA.finished != 1 {
		t.Fatalf("the supervising replica ran %d agents", agentsA.finished)
	}
}
