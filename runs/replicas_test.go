package runs_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
)

// TestForceThroughAnotherReplica: two replicas (a backend and a
// supervisor each, on stores of their own over one PostgreSQL schema). A
// force sent to the replica that does not supervise the run is acted on
// by the one that does: its worker is cancelled, and the run is finished
// force_stopped on both. The supervising replica learns of the change
// only from the store (the version it reads there), not from a write of
// its own.
func TestForceThroughAnotherReplica(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	replica := func(owner string) (*runs.Backend, *fakeAgents, func()) {
		st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn, LeaseTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		agents := newFakeAgents()
		b := runs.New(runs.Config{Store: st, Agents: agents, Log: slog.New(slog.DiscardHandler)})
		stop := runEngine(t, b.Ledger(owner))
		return b, agents, func() { stop(); b.Close(); _ = st.Close() }
	}
	a, agentsA, stopA := replica("replica-a")
	defer stopA()
	ctx := as("alice")
	if _, err := a.Submit(ctx, "f", oneStep("f", "block")); err != nil {
		t.Fatal(err)
	}
	ref := testkit.Recv(t, agentsA.started)
	// The second replica starts once the first supervises the run: its
	// supervisor finds the run's lease held.
	b, _, stopB := replica("replica-b")
	defer stopB()
	res, err := b.Force(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status.Phase != runs.PhaseStopping {
		t.Fatalf("force answered %+v", res.Status)
	}
	guard := time.NewTimer(time.Minute) // a hang guard, no timing assertion
	defer guard.Stop()
	select {
	case got := <-agentsA.cancelled:
		if got != ref {
			t.Fatalf("cancelled %s, want %s", got, ref)
		}
	case <-guard.C:
		t.Fatal("the supervising replica never cancelled the forced run's worker")
	}
	for _, r := range []*runs.Backend{a, b} {
		if got := statusJSON(t, waitFinished(t, r, ctx, "f")); got != `{"phase":"finished","terminalResult":{"status":"failed","reason":"force_stopped"}}` {
			t.Fatalf("final %s", got)
		}
	}
}

// TestVersionSeesOtherReplicasWrites: a run's version, as one replica's
// ledger reads it, changes with a write another replica's ledger commits
// to the run, so a replica never reuses a reading of a run another one
// changed.
func TestVersionSeesOtherReplicasWrites(t *testing.T) {
	st := store.NewMemory()
	a := runs.New(runs.Config{Store: st, Agents: newFakeAgents(), Log: slog.New(slog.DiscardHandler)})
	b := runs.New(runs.Config{Store: st, Agents: newFakeAgents(), Log: slog.New(slog.DiscardHandler)})
	defer a.Close()
	defer b.Close()
	if _, err := a.Submit(as("alice"), "v", oneStep("v", "echo")); err != nil {
		t.Fatal(err)
	}
	la, lb := a.Ledger("replica-a"), b.Ledger("replica-b")
	ctx := context.Background()
	refs, err := la.Running(ctx)
	if err != nil || len(refs) != 1 {
		t.Fatalf("running %v %v", refs, err)
	}
	ref := refs[0]
	before := la.Version(ref)
	// The other replica supervises the run now and records a dispatch.
	must(t, lb.Claim(ctx, ref))
	must(t, lb.Dispatch(ctx, ref, []engine.Dispatch{{Ref: "v/work/1", Dispatch: reduce.Dispatch{
		NodeInstance: 1, Execution: 1, Occurrence: reduce.Occurrence{Node: "work"}, Attempt: 1, Input: json.RawMessage("null")}}}))
	if _, err := la.Running(ctx); err != nil {
		t.Fatal(err)
	}
	if after := la.Version(ref); after == before || after == 0 {
		t.Fatalf("version %d before and %d after the other replica's dispatch", before, after)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSpendingMovesToAnotherReplica: two replicas over one PostgreSQL
// schema. The first records what its agent spent, then dies with the
// execution active; the second takes the run over and its rerun of the
// step reads the spending from the run's record and adds to it.
func TestSpendingMovesToAnotherReplica(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	agents := newFakeAgents()
	replica := func(owner string) (*runs.Backend, func()) {
		st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn, LeaseTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		b := runs.New(runs.Config{Store: st, Agents: agents, Log: slog.New(slog.DiscardHandler)})
		stop := runEngine(t, dies{b.Ledger(owner)})
		return b, func() { stop(); b.Close(); _ = st.Close() }
	}
	a, stopA := replica("replica-a")
	if _, err := a.Submit(as("alice"), "sp", oneStep("sp", "spend")); err != nil {
		t.Fatal(err)
	}
	if got := testkit.Recv(t, agents.spends); got != "0->0.25 <nil> <nil>" {
		t.Fatalf("first replica: %s", got)
	}
	stopA() // its execution stays active; its lease is released
	_, stopB := replica("replica-b")
	defer stopB()
	if got := testkit.Recv(t, agents.spends); got != "0.25->0.5 <nil> <nil>" {
		t.Fatalf("replica that took the run over: %s", got)
	}
}
