package runs_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
)

// checkpointWorkspaces is fakeWorkspaces that checkpoints: a checkpoint
// after execution X is "after X"; Restore records what it was given and
// fails with fail, when set.
type checkpointWorkspaces struct {
	*fakeWorkspaces
	fail *runs.RestoreError

	mu       sync.Mutex
	taken    []string
	restored chan string
}

func newCheckpointWorkspaces(fail *runs.RestoreError) *checkpointWorkspaces {
	return &checkpointWorkspaces{fakeWorkspaces: &fakeWorkspaces{prepared: make(chan string, 8)}, fail: fail, restored: make(chan string, 4)}
}

func (c *checkpointWorkspaces) Checkpoint(_ context.Context, _, _ string, _ runs.Source, execution string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.taken = append(c.taken, execution)
	return []byte("after " + execution)
}

func (c *checkpointWorkspaces) Restore(_ context.Context, _, _ string, _ runs.Source, record []byte) error {
	c.restored <- string(record)
	if c.fail != nil {
		return c.fail
	}
	return nil
}

// host runs a backend and its engine on st until the test ends; the
// engine's ledger is wrapped by wrap, when set.
func host(t *testing.T, st store.Store, ws runs.Workspaces, owner string, wrap func(*runs.Ledger) engine.Ledger) (*runs.Backend, *fakeAgents, func()) {
	t.Helper()
	agents := newFakeAgents()
	b := runs.New(runs.Config{Store: st, Agents: agents, Workspaces: ws, Log: slog.New(slog.DiscardHandler)})
	var l engine.Ledger = b.Ledger(owner)
	if wrap != nil {
		l = wrap(b.Ledger(owner))
	}
	stop := runSupervisor(t, engine.New(l, worker.NewRegistry(), slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { stop(); b.Close() })
	return b, agents, stop
}

// TestTakeoverRestoresTheLatestCheckpoint: a step's checkpoint is kept
// with its settlement; a host that takes over a run whose next step was
// lost with its server rebuilds the workspace from that checkpoint (not
// from the lost step's), runs the step again and finishes; retention
// deletes the checkpoint with the run.
func TestTakeoverRestoresTheLatestCheckpoint(t *testing.T) {
	st := store.NewMemory()
	ctx := as("alice")
	firstWS := newCheckpointWorkspaces(nil)
	first, firstAgents, stop := host(t, st, firstWS, "first", func(l *runs.Ledger) engine.Ledger { return dies{l} })
	if _, err := first.Submit(ctx, "r", submission("r", graphOf(step("a", "echo"), step("b", "block")), "a", "b")); err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, firstAgents.started) // b runs: a has settled with its checkpoint
	stop()                               // b is lost with its server
	secondWS := newCheckpointWorkspaces(nil)
	second, secondAgents, _ := host(t, st, secondWS, "second", nil)
	if got := testkit.Recv(t, secondWS.restored); got != "after r/a/1" {
		t.Fatalf("restored %q, want the checkpoint after r/a/1", got)
	}
	if ref := testkit.Recv(t, secondAgents.started); ref != "r/b/2" {
		t.Fatalf("rerun %s", ref)
	}
	close(secondAgents.release)
	if got := statusJSON(t, waitFinished(t, second, ctx, "r")); got != `{"phase":"finished","terminalResult":{"status":"succeeded","output":null}}` {
		t.Fatalf("final %s", got)
	}
	secondWS.mu.Lock()
	taken := strings.Join(secondWS.taken, " ")
	secondWS.mu.Unlock()
	if taken != "r/b/2" {
		t.Fatalf("second host's checkpoints: %q", taken)
	}
	logs := logLines(t, second, ctx, "r")
	if !strings.Contains(logs, "workspace: rebuilt from") || !strings.Contains(logs, "was running on a server that was lost") {
		t.Fatalf("logs:\n%s", logs)
	}
	tk := second.TenantKey("alice")
	if !hasCheckpoint(t, st, tk, "r") {
		t.Fatal("no checkpoint record")
	}
	if n, err := second.Compact(context.Background(), time.Now().Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("compact %d %v", n, err)
	}
	if hasCheckpoint(t, st, tk, "r") {
		t.Fatal("retention left the run's checkpoint")
	}
}

// TestUnrestorableWorkspaceEndsRuntimeLost: a workspace that cannot be
// rebuilt ends the run runtime_lost with the reason in its log.
func TestUnrestorableWorkspaceEndsRuntimeLost(t *testing.T) {
	st := store.NewMemory()
	ctx := as("alice")
	first, firstAgents, stop := host(t, st, newCheckpointWorkspaces(nil), "first", func(l *runs.Ledger) engine.Ledger { return dies{l} })
	if _, err := first.Submit(ctx, "r", submission("r", graphOf(step("a", "echo"), step("b", "block")), "a", "b")); err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, firstAgents.started)
	stop()
	ws := newCheckpointWorkspaces(&runs.RestoreError{Why: "its checkpoint is damaged", Err: errors.New("bundle: truncated")})
	second, secondAgents, _ := host(t, st, ws, "second", nil)
	if got := statusJSON(t, waitFinished(t, second, ctx, "r")); got != `{"phase":"finished","terminalResult":{"status":"failed","reason":"runtime_lost"}}` {
		t.Fatalf("final %s", got)
	}
	if logs := logLines(t, second, ctx, "r"); !strings.Contains(logs, "cannot be rebuilt on this server: its checkpoint is damaged") || strings.Contains(logs, "truncated") {
		t.Fatalf("logs:\n%s", logs)
	}
	select {
	case ref := <-secondAgents.started:
		t.Fatalf("%s ran without a workspace", ref)
	default:
	}
}

func hasCheckpoint(t *testing.T, st store.Store, tk, runID string) bool {
	t.Helper()
	var ok bool
	if err := st.View(context.Background(), func(tx store.ReadTx) error {
		var err error
		_, ok, err = tx.Checkpoint(tk, runID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ok
}

// logLines are a finished run's log messages, one a line.
func logLines(t *testing.T, b *runs.Backend, ctx context.Context, runID string) string {
	t.Helper()
	sub, err := b.Logs(ctx, runID, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines, _ := drain(t, sub)
	var out []string
	for _, l := range lines {
		out = append(out, l["record"].(map[string]any)["message"].(string))
	}
	return strings.Join(out, "\n")
}
