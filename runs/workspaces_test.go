package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
)

// fakeWorkspaces serves repository oecp/oecp to every tenant and
// acme/private to bob alone, refusing in the host's words; Prepare
// reports each call
// on prepared, then waits for release (when set) and returns err.
type fakeWorkspaces struct {
	prepared chan string
	release  chan struct{}
	err      error
}

func (f *fakeWorkspaces) CheckSource(tenant string, src runs.Source) error {
	if src.Repository != "oecp/oecp" && (src.Repository != "acme/private" || tenant != "bob") {
		return fmt.Errorf("%s is not listed in the server's --repos file", src.Repository)
	}
	return nil
}

func (f *fakeWorkspaces) CheckDelivery(n graph.Node) error {
	if v, ok := n.(*graph.Verifier); !ok || v.Worker != "builtin.git-delivery.pr@1" {
		return errors.New("not the delivery contract")
	}
	return nil
}

func (f *fakeWorkspaces) Prepare(ctx context.Context, _, runID string, _ runs.Source) error {
	f.prepared <- runID
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return f.err
}

// No execution starts before the run's workspace is ready.
func TestRunWaitsForItsWorkspace(t *testing.T) {
	ws := &fakeWorkspaces{prepared: make(chan string, 1), release: make(chan struct{})}
	r := newRigWith(t, nil, 0, ws)
	ctx := as("alice")
	if _, err := r.b.Submit(ctx, "w", oneStep("k", "echo")); err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, ws.prepared)
	if st, err := r.b.Status(ctx, "w"); err != nil || st.Status.Phase != runs.PhaseAdmitted {
		t.Fatalf("while preparing: %+v %v", st, err)
	}
	close(ws.release)
	if got := statusJSON(t, waitFinished(t, r.b, ctx, "w")); got != `{"phase":"finished","terminalResult":{"status":"succeeded","output":null}}` {
		t.Fatalf("final %s", got)
	}
	if logs := logLines(t, r.b, ctx, "w"); !strings.HasPrefix(logs, "workspace: oecp/oecp at 0123456789abcdef0123456789abcdef01234567 is ready") {
		t.Fatalf("logs:\n%s", logs)
	}
}

// A revision the repository lacks fails the run before any agent runs.
func TestUnknownRevisionFailsTheRun(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{fmt.Errorf("%w: 0123456789abcdef0123456789abcdef01234567 is not a commit of the repository", runs.ErrRevisionNotFound), runs.ReasonRevisionNotFound},
		{errors.New("git failed: git clone --no-tags -- https://x:ghp_secret@example.test/a.git /data/run: connection refused"), runs.ReasonRuntimeUnavailable},
	} {
		ws := &fakeWorkspaces{prepared: make(chan string, 1), err: tc.err}
		r := newRigWith(t, nil, 0, ws)
		ctx := as("alice")
		if _, err := r.b.Submit(ctx, "u", oneStep("k", "echo")); err != nil {
			t.Fatal(err)
		}
		want := `{"phase":"finished","terminalResult":{"status":"failed","reason":"` + tc.reason + `"}}`
		if got := statusJSON(t, waitFinished(t, r.b, ctx, "u")); got != want {
			t.Fatalf("final %s", got)
		}
		r.agents.mu.Lock()
		ran := r.agents.finished
		r.agents.mu.Unlock()
		if logs := logLines(t, r.b, ctx, "u"); ran != 0 || logs != "workspace: the repository could not be cloned at the requested revision" {
			t.Fatalf("%d agents ran; logs:\n%s", ran, logs)
		}
	}
}

func TestWorkspaceAdmission(t *testing.T) {
	ws := &fakeWorkspaces{prepared: make(chan string, 8)}
	r := newRigWith(t, nil, 0, ws)
	ctx := as("alice")
	deliver := `{"kind":"verifier","name":"deliver","worker":"builtin.git-delivery.pr@1","input":{"kind":"null"},"output":{"kind":"null"},` +
		`"inputBindings":[],"writeBindings":[],"timeoutMs":600000,"attempts":1,"signals":{"delivery":["opened"]},"diagnostic":{"kind":"null"}}`
	withDelivery := func(binding string) json.RawMessage {
		sub := string(submission("k", graphOf(step("work", "echo"), deliver), "work"))
		return json.RawMessage(strings.Replace(sub, `"nodes":{`, `"nodes":{"deliver":`+binding+`,`, 1))
	}
	private := json.RawMessage(strings.Replace(string(oneStep("k", "echo")), "oecp/oecp", "acme/private", 1))
	for name, sub := range map[string]json.RawMessage{
		"repository":   json.RawMessage(strings.Replace(string(oneStep("k", "echo")), "oecp/oecp", "acme/app", 1)),
		"other tenant": private,
		"delivery env": withDelivery(`{"kind":"git_delivery","env":["GH_TOKEN"]}`),
		"contract":     json.RawMessage(strings.Replace(string(withDelivery(`{"kind":"git_delivery"}`)), "builtin.git-delivery.pr@1", "builtin.echo@1", 1)),
	} {
		_, err := r.b.Submit(ctx, "a", sub)
		if pe, ok := err.(*protocol.Error); !ok || pe.DataCode != protocol.GraphInvalid {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := r.b.Submit(ctx, "d", withDelivery(`{"kind":"git_delivery"}`)); err != nil {
		t.Fatalf("delivery refused: %v", err)
	}
	if _, err := r.b.Submit(as("bob"), "p", private); err != nil {
		t.Fatalf("listed tenant refused: %v", err)
	}
}

// A refused repository is refused in fixed words, whether the host lacks
// it or serves it to other tenants only, naming nothing of the host.
func TestRepositoryRefusalRevealsNothing(t *testing.T) {
	r := newRigWith(t, nil, 0, &fakeWorkspaces{prepared: make(chan string, 8)})
	for repo, want := range map[string]string{"acme/app": "repository is not served: acme/app", "acme/private": "repository is not served: acme/private"} {
		_, err := r.b.Submit(as("alice"), "a", json.RawMessage(strings.Replace(string(oneStep("k", "echo")), "oecp/oecp", repo, 1)))
		pe, ok := err.(*protocol.Error)
		if !ok || pe.DataCode != protocol.GraphInvalid {
			t.Fatalf("%s: %v", repo, err)
		}
		if b, _ := json.Marshal(pe.Details); string(b) != `{"reason":"`+want+`"}` {
			t.Errorf("%s: details %s", repo, b)
		}
	}
}

// A run forced while its workspace is being made is closed again once the
// clone landed, so the clone is marked finished and removed too.
func TestRunForcedWhilePreparingClosesAgain(t *testing.T) {
	ws := &fakeWorkspaces{prepared: make(chan string, 1), release: make(chan struct{})}
	r := newRigWith(t, nil, 0, ws)
	r.agents.closed = make(chan string, 4)
	ctx := as("alice")
	if _, err := r.b.Submit(ctx, "f", oneStep("k", "echo")); err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, ws.prepared)
	if _, err := r.b.Force(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if got := testkit.Recv(t, r.agents.closed); got != "f" {
		t.Fatalf("closed %q", got)
	}
	close(ws.release)
	select {
	case got := <-r.agents.closed:
		if got != "f" {
			t.Fatalf("closed %q", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not closed again after the clone landed")
	}
}

// TestAStaleReadingOfAFinishedRunMakesNoWorkspace: a reading of a run
// taken before its finishing commit can reach the workspace bookkeeping
// after that commit closed the run and forgot its workspace. It must not
// make the workspace again (or, its executions having started, rebuild
// it from its checkpoint: once seen taking 210 ms of a loaded machine
// after a one-step run had ended), nor leave the run's state behind.
func TestAStaleReadingOfAFinishedRunMakesNoWorkspace(t *testing.T) {
	src := runs.Source{Repository: "oecp/oecp", Branch: "main", Revision: "0123456789abcdef0123456789abcdef01234567"}
	// finished runs a one-step run to its end and its close, and returns
	// the mark of a reading taken before the run finished: while the
	// run's workspace is being made, which waits for release.
	finished := func(t *testing.T, ws runs.Workspaces, prepared <-chan string, release chan struct{}) (*rig, uint64) {
		r := newRigWith(t, nil, 0, ws)
		r.agents.closed = make(chan string, 4)
		ctx := as("alice")
		if _, err := r.b.Submit(ctx, "s", oneStep("k", "echo")); err != nil {
			t.Fatal(err)
		}
		testkit.Recv(t, prepared)
		mark := runs.WorkspaceMark(r.b)
		close(release)
		waitFinished(t, r.b, ctx, "s")
		testkit.Recv(t, r.agents.closed) // the close forgot the workspace
		return r, mark
	}
	t.Run("prepared", func(t *testing.T) {
		ws := &fakeWorkspaces{prepared: make(chan string, 4), release: make(chan struct{})}
		r, mark := finished(t, ws, ws.prepared, ws.release)
		for _, started := range []bool{false, true} {
			if kept := runs.StaleWorkspaceReady(r.b, "alice", "s", src, started, mark); kept {
				t.Errorf("started=%v: the finished run's workspace state is kept", started)
			}
			select {
			case id := <-ws.prepared:
				t.Fatalf("started=%v: the finished run %s's workspace was made again", started, id)
			default:
			}
		}
	})
	t.Run("checkpointed", func(t *testing.T) {
		ws := newCheckpointWorkspaces(nil)
		ws.release = make(chan struct{})
		r, mark := finished(t, ws, ws.prepared, ws.release)
		if kept := runs.StaleWorkspaceReady(r.b, "alice", "s", src, true, mark); kept {
			t.Error("the finished run's workspace state is kept")
		}
		select {
		case rec := <-ws.restored:
			t.Fatalf("the finished run's workspace was rebuilt from %q", rec)
		default:
		}
	})
	t.Run("lost", func(t *testing.T) {
		ws := &keeperWorkspaces{fakeWorkspaces: &fakeWorkspaces{prepared: make(chan string, 4), release: make(chan struct{})}}
		r, mark := finished(t, ws, ws.prepared, ws.release)
		if kept := runs.StaleWorkspaceReady(r.b, "alice", "s", src, true, mark); kept {
			t.Error("the finished run's workspace state is kept")
		}
		select {
		case id := <-r.agents.closed:
			t.Fatalf("the finished run %s was closed again as lost", id)
		default:
		}
		if got := statusJSON(t, waitFinished(t, r.b, as("alice"), "s")); got != `{"phase":"finished","terminalResult":{"status":"succeeded","output":null}}` {
			t.Fatalf("final %s", got)
		}
	})
}

// keeperWorkspaces is fakeWorkspaces on a host that may or may not hold a
// run's prepared workspace.
type keeperWorkspaces struct {
	*fakeWorkspaces
	holds bool
}

func (k *keeperWorkspaces) Prepared(string, string, runs.Source) bool { return k.holds }

// TestLostWorkspaceEndsTheRunRuntimeLost: a run whose executions started
// with a workspace that the host now running it does not hold (another
// replica's, or a lost data directory) ends failed runtime_lost instead of
// starting over on a fresh clone; no agent runs again.
func TestLostWorkspaceEndsTheRunRuntimeLost(t *testing.T) {
	st := store.NewMemory()
	first := &keeperWorkspaces{fakeWorkspaces: &fakeWorkspaces{prepared: make(chan string, 4)}, holds: true}
	a := newRigWith(t, st, 0, first)
	ctx := as("alice")
	if _, err := a.b.Submit(ctx, "lost", oneStep("lost", "block")); err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, a.agents.started) // the run's execution started on the first host

	second := &keeperWorkspaces{fakeWorkspaces: &fakeWorkspaces{prepared: make(chan string, 4)}, holds: false}
	b := runs.New(runs.Config{Store: st, Agents: newFakeAgents(), Workspaces: second, Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(b.Close)
	sup := engine.New(b.Ledger("second-host"), worker.NewRegistry(), slog.New(slog.DiscardHandler))
	c, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sup.Run(c) }()
	t.Cleanup(func() { cancel(); testkit.Recv(t, done) })

	if got := statusJSON(t, waitFinished(t, b, ctx, "lost")); got != `{"phase":"finished","terminalResult":{"status":"failed","reason":"runtime_lost"}}` {
		t.Fatalf("final %s", got)
	}
	select {
	case id := <-second.prepared:
		t.Fatalf("the second host cloned %s again", id)
	default:
	}
}
