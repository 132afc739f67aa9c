package runs_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
)

// dies is the ledger of a server killed with SIGKILL: it records its
// workers' process groups, but never the executions its shutdown
// cancelled, so they stay active for the next server.
type dies struct{ *runs.Ledger }

func (dies) Interrupt(context.Context, engine.RunRef, []uint64) error { return nil }

// runEngine runs a supervisor over ledger until the returned stop.
func runEngine(t testing.TB, ledger engine.Ledger) (stop func()) {
	return runSupervisor(t, engine.New(ledger, worker.NewRegistry(), slog.New(slog.DiscardHandler)))
}

// runSupervisor runs sup until the returned stop, which fails t when sup
// does not return.
func runSupervisor(t testing.TB, sup *engine.Supervisor) (stop func()) {
	c, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sup.Run(c) }()
	return func() { cancel(); testkit.Recv(t, done) }
}

// TestRestartRerunsOrphan: an execution a killed server left active did
// not fail, its server did: the next engine on the same store kills what
// is left of the process group the execution's worker started, records
// it interrupted with a warn line naming it (no completion, no crash for
// the graph to route) and runs the same node again.
func TestRestartRerunsOrphan(t *testing.T) {
	st := store.NewMemory()
	agents := newFakeAgents()
	b := runs.New(runs.Config{Store: st, Agents: agents, Log: slog.New(slog.DiscardHandler)})
	ctx := as("alice")
	stop := runEngine(t, dies{b.Ledger("first")})
	if _, err := b.Submit(ctx, "o", submission("o", graphOf(step("a", "spawn"), step("b", "echo")), "a", "b")); err != nil {
		t.Fatal(err)
	}
	orphan := testkit.Recv(t, agents.spawned)
	t.Cleanup(func() { _ = orphan.Process.Kill(); _ = orphan.Wait() })
	stop() // the worker returns; its process and its execution stay
	if s, _ := b.Status(ctx, "o"); s.Status.Phase != runs.PhaseRunning || len(*s.Status.ActiveExecutions) != 1 {
		t.Fatalf("after the kill: %+v", s.Status)
	}
	if s := testkit.ProcState(orphan.Process.Pid); s == "Z" || s == "" {
		t.Fatalf("the orphan's process must still run (state %q)", s)
	}
	defer runEngine(t, b.Ledger("second"))()
	rerun := testkit.Recv(t, agents.spawned)
	t.Cleanup(func() { _ = rerun.Process.Kill(); _ = rerun.Wait() })
	if s := testkit.ProcState(orphan.Process.Pid); s != "Z" && s != "" {
		t.Fatalf("the orphan's process group was not killed before its rerun (state %s)", s)
	}
	s, err := b.Status(ctx, "o")
	if err != nil || len(*s.Status.ActiveExecutions) != 1 || (*s.Status.ActiveExecutions)[0].Execution != "o/a/2" {
		t.Fatalf("after the restart: %+v %v", s, err)
	}
	if _, err := b.Force(ctx, "o"); err != nil {
		t.Fatal(err)
	}
	sub, _ := b.Logs(ctx, "o", nil, nil)
	lines, _ := drain(t, sub)
	if len(lines) != 1 || lines[0]["record"].(map[string]any)["level"] != "warn" || lines[0]["execution"] != "o/a/1" ||
		!strings.Contains(lines[0]["record"].(map[string]any)["message"].(string), "runs again") {
		t.Fatalf("logs %v", lines)
	}
	b.Close()
}

// TestSpendingMovesWithTheRun: what a run's agents spent is kept in the
// run's record, so the engine that takes the run over (here after the
// first one died) continues the run's spending from it, not from zero.
func TestSpendingMovesWithTheRun(t *testing.T) {
	st := store.NewMemory()
	agents := newFakeAgents()
	b := runs.New(runs.Config{Store: st, Agents: agents, Log: slog.New(slog.DiscardHandler)})
	defer b.Close()
	ctx := as("alice")
	stop := runEngine(t, dies{b.Ledger("first")})
	if _, err := b.Submit(ctx, "sp", oneStep("sp", "spend")); err != nil {
		t.Fatal(err)
	}
	if got := testkit.Recv(t, agents.spends); got != "0->0.25 <nil> <nil>" {
		t.Fatalf("first engine: %s", got)
	}
	stop()
	defer runEngine(t, b.Ledger("second"))()
	if got := testkit.Recv(t, agents.spends); got != "0.25->0.5 <nil> <nil>" {
		t.Fatalf("engine that took the run over: %s", got)
	}
}

// TestGracefulStopInterrupts: an execution a graceful shutdown cancelled
// is interrupted, not failed: no completion, a warn log line naming it,
// it leaves the active executions, and the next engine dispatches the
// same node again, whose success finishes the run.
func TestGracefulStopInterrupts(t *testing.T) {
	st := store.NewMemory()
	agents := newFakeAgents()
	b := runs.New(runs.Config{Store: st, Agents: agents, Log: slog.New(slog.DiscardHandler)})
	ctx := as("alice")
	stop := runEngine(t, b.Ledger("first"))
	if _, err := b.Submit(ctx, "g", submission("g", graphOf(step("a", "block")), "a")); err != nil {
		t.Fatal(err)
	}
	first := testkit.Recv(t, agents.started)
	stop()
	s, _ := b.Status(ctx, "g")
	if s.Status.Phase != runs.PhaseRunning || len(*s.Status.ActiveExecutions) != 0 {
		t.Fatalf("after the stop: %+v", s.Status)
	}
	defer runEngine(t, b.Ledger("second"))()
	again := testkit.Recv(t, agents.started)
	if first != "g/a/1" || again != "g/a/2" {
		t.Fatalf("executions %s then %s, want g/a/1 then g/a/2", first, again)
	}
	close(agents.release)
	if got := statusJSON(t, waitFinished(t, b, ctx, "g")); got != `{"phase":"finished","terminalResult":{"status":"succeeded","output":null}}` {
		t.Fatalf("final %s", got)
	}
	sub, _ := b.Logs(ctx, "g", nil, nil)
	lines, _ := drain(t, sub)
	var warns []string
	for _, l := range lines {
		if r := l["record"].(map[string]any); r["level"] == "warn" {
			warns = append(warns, l["execution"].(string)+": "+r["message"].(string))
		}
	}
	if len(warns) != 1 || !strings.HasPrefix(warns[0], "g/a/1: this execution was interrupted") {
		t.Fatalf("warn logs %q", warns)
	}
	b.Close()
}
