package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
)

func statusJSON(_ testing.TB, s runs.RunStatus) string {
	b, _ := protocol.Marshal(s)
	return string(b)
}

func TestOneStepRunFinishes(t *testing.T) {
	r := newRig(t, nil, 0)
	ctx := as("alice")
	res, err := r.b.Submit(ctx, "r1", oneStep("k1", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	if res.RunID != "r1" {
		t.Fatalf("runId %q", res.RunID)
	}
	if got := statusJSON(t, waitFinished(t, r.b, ctx, "r1")); got != `{"phase":"finished","terminalResult":{"status":"succeeded","output":null}}` {
		t.Fatalf("final status %s", got)
	}
}

// TestUnroutedErrorContinues: a failing agent no guard routes sets its
// error control and the run still reaches its succeed, with no retry.
func TestUnroutedErrorContinues(t *testing.T) {
	r := newRig(t, nil, 0)
	ctx := as("alice")
	sub := submission("k", graphOf(step("a", "fail"), step("b", "echo")), "a", "b")
	if _, err := r.b.Submit(ctx, "r", sub); err != nil {
		t.Fatal(err)
	}
	if got := statusJSON(t, waitFinished(t, r.b, ctx, "r")); !strings.Contains(got, `"succeeded"`) {
		t.Fatalf("final status %s", got)
	}
}

func TestSubmitReplayConflictAndKeyReuse(t *testing.T) {
	r := newRig(t, nil, 0)
	ctx := as("alice")
	first := oneStep("key-1", "echo")
	if _, err := r.b.Submit(ctx, "r1", first); err != nil {
		t.Fatal(err)
	}
	// The identical submission under the same run id answers the same run.
	if res, err := r.b.Submit(ctx, "r1", first); err != nil || res.RunID != "r1" {
		t.Fatalf("replay: %v %v", res, err)
	}
	// The same run id with another submission is RUN_CONFLICT.
	if _, err := r.b.Submit(ctx, "r1", oneStep("key-2", "echo")); errCode(err) != protocol.RunConflict {
		t.Fatalf("run id conflict: %v", err)
	}
	// The same key and submission under another run id answers the
	// existing run.
	if res, err := r.b.Submit(ctx, "r2", first); err != nil || res.RunID != "r1" {
		t.Fatalf("key replay: %v %v", res, err)
	}
	// The same key with another submission is IDEMPOTENCY_REUSE naming it.
	other := submission("key-1", graphOf(step("other", "echo")), "other")
	_, err := r.b.Submit(ctx, "r3", other)
	pe, ok := err.(*protocol.Error)
	if !ok || pe.DataCode != protocol.IdempotencyReuse || !strings.Contains(details(pe), "r1") {
		t.Fatalf("key reuse: %#v", err)
	}
	// Another tenant may use the same run id and key.
	if res, err := r.b.Submit(as("bob"), "r1", other); err != nil || res.RunID != "r1" {
		t.Fatalf("other tenant: %v %v", res, err)
	}
}

func TestListIsNewestFirst(t *testing.T) {
	r := newRig(t, nil, 0)
	ctx := as("alice")
	for _, id := range []string{"a", "b", "c"} {
		if _, err := r.b.Submit(ctx, id, oneStep(id, "echo")); err != nil {
			t.Fatal(err)
		}
	}
	l, err := r.b.List(ctx)
	if err != nil || len(l.Runs) != 3 || l.Runs[0].RunID != "c" || l.Runs[2].RunID != "a" {
		t.Fatalf("list %+v %v", l, err)
	}
}

func TestSubmitRefusals(t *testing.T) {
	r := newRig(t, nil, 0)
	ctx := as("alice")
	g := graphOf(step("work", "echo"))
	cases := []struct {
		name, runID string
		sub         json.RawMessage
		code        string
		reason      string
	}{
		{"cluster run id", "run-7", oneStep("k", "echo"), protocol.SchemaViolation, "v1 cluster run id"},
		{"bad run id", "-x", oneStep("k", "echo"), protocol.SchemaViolation, "runId"},
		{"unknown field", "a", json.RawMessage(strings.Replace(string(oneStep("k", "echo")), `"title"`, `"extra":1,"title"`, 1)), protocol.SchemaViolation, "unknown field"},
		{"attempts", "a", submission("k", strings.Replace(g, `"attempts":1`, `"attempts":2`, 1), "work"), protocol.GraphInvalid, "attempts 1"},
		{"unbound node", "a", submission("k", g), protocol.GraphInvalid, "does not bind"},
		{"extra binding", "a", submission("k", g, "work", "ghost"), protocol.GraphInvalid, "not an executable"},
		{"no instructions", "a", submission("k", strings.Replace(g, `"instructions":"echo",`, "", 1), "work"), protocol.GraphInvalid, "instructions"},
		{"model", "a", json.RawMessage(strings.Replace(string(oneStep("k", "echo")), "gpt-5.6", "gpt-4", 1)), protocol.GraphInvalid, "catalogue"},
		{"harness", "a", json.RawMessage(strings.NewReplacer("codex", "claude", `"openai"`, `"anthropic"`, "gpt-5.6", "claude-sonnet-5").Replace(string(oneStep("k", "echo")))), protocol.GraphInvalid, "--harness"},
		{"env", "a", json.RawMessage(strings.Replace(string(oneStep("k", "echo")), `"model":"gpt-5.6"`, `"model":"gpt-5.6","env":["HOME"]`, 1)), protocol.GraphInvalid, "HOME"},
		{"delivery", "a", json.RawMessage(strings.Replace(string(oneStep("k", "echo")), `{"kind":"agent","model":"gpt-5.6"}`, `{"kind":"git_delivery"}`, 1)), protocol.GraphInvalid, "git delivery"},
		{"input type", "a", json.RawMessage(strings.Replace(string(oneStep("k", "echo")), `"initialInput":null`, `"initialInput":1`, 1)), protocol.GraphInvalid, "initialInput"},
		{"overlap", "a", submission("k", graphOf(`{"kind":"par","name":"p","state":{"kind":"null"},"promotedStatePaths":[],"join":{"kind":"all"},"branches":[`+step("w1", "echo")+`,`+step("w2", "echo")+`]}`), "w1", "w2"), protocol.GraphInvalid, "alongside"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.b.Submit(ctx, c.runID, c.sub)
			pe, ok := err.(*protocol.Error)
			if !ok || pe.DataCode != c.code || pe.Code != protocol.CodeInvalidParams || !strings.Contains(details(pe), c.reason) {
				t.Fatalf("got %#v, want %s mentioning %q", err, c.code, c.reason)
			}
		})
	}
	if _, err := r.b.Status(ctx, "a"); errCode(err) != protocol.NotFound {
		t.Fatalf("a refused submission left a run: %v", err)
	}
}

// TestVerifierDiagnostics: a graph the production verifier rejects is
// GRAPH_INVALID with its diagnostics.
func TestVerifierDiagnostics(t *testing.T) {
	r := newRig(t, nil, 0)
	bad := strings.Replace(step("work", "echo"), `"writeBindings":[]`, `"writeBindings":[{"value":{"node":"work","channel":"out","path":["x"]},"target":["y"]}]`, 1)
	_, err := r.b.Submit(as("alice"), "a", submission("k", graphOf(bad), "work"))
	pe, ok := err.(*protocol.Error)
	if !ok || pe.DataCode != protocol.GraphInvalid || !strings.Contains(details(pe), "diagnostics") {
		t.Fatalf("got %#v", err)
	}
}

// TestTenantsNeverSeeEachOthersRuns: status, list, watch, logs, attach and
// force of another tenant's run answer as if it did not exist.
func TestTenantsNeverSeeEachOthersRuns(t *testing.T) {
	r := newRig(t, nil, 0)
	alice, bob := as("alice"), as("bob")
	if _, err := r.b.Submit(alice, "secret", oneStep("k", "echo")); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, r.b, alice, "secret")
	if _, err := r.b.Status(bob, "secret"); errCode(err) != protocol.NotFound {
		t.Fatalf("status: %v", err)
	}
	if _, err := r.b.Force(bob, "secret"); errCode(err) != protocol.NotFound {
		t.Fatalf("force: %v", err)
	}
	if _, err := r.b.Watch(bob, "secret", nil); errCode(err) != protocol.NotFound {
		t.Fatalf("watch: %v", err)
	}
	if _, err := r.b.Logs(bob, "secret", nil, nil); errCode(err) != protocol.NotFound {
		t.Fatalf("logs: %v", err)
	}
	if _, err := r.b.Attach(bob, "secret", "secret/work/1"); errCode(err) != protocol.NotFound {
		t.Fatalf("attach: %v", err)
	}
	if l, err := r.b.List(bob); err != nil || len(l.Runs) != 0 {
		t.Fatalf("list: %v %v", l, err)
	}
	if l, err := r.b.List(alice); err != nil || len(l.Runs) != 1 || l.Runs[0].RunID != "secret" {
		t.Fatalf("alice's list: %v %v", l, err)
	}
}

// TestFiftyConcurrentRunsFinish: 50 runs submitted at once by several
// callers all finish, under a bound of 4 active executions, and list
// shows them newest first.
func TestFiftyConcurrentRunsFinish(t *testing.T) {
	r := newRig(t, nil, 4)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := as(fmt.Sprintf("tenant-%d", i%3))
			id := fmt.Sprintf("run%02d", i)
			if _, err := r.b.Submit(ctx, id, submission(id, graphOf(step("a", "log:2"), step("b", "echo")), "a", "b")); err != nil {
				errs <- err
				return
			}
			waitFinished(t, r.b, ctx, id)
		}()
	}
	testkit.Wait(t, &wg)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	l, err := r.b.List(as("tenant-0"))
	if err != nil || len(l.Runs) != 17 {
		t.Fatalf("list: %d %v", len(l.Runs), err)
	}
	for _, run := range l.Runs {
		if run.Status.Phase != runs.PhaseFinished {
			t.Fatalf("%s is %s", run.RunID, run.Status.Phase)
		}
	}
}

func details(pe *protocol.Error) string {
	b, _ := protocol.Marshal(pe.Details)
	return string(b)
}

// unwritable is a store whose writes fail the way a full disk fails them.
type unwritable struct{ store.Store }

func (unwritable) Update(context.Context, func(store.Tx) error) error {
	return fmt.Errorf("%w: disk full", store.ErrUnavailable)
}

// TestStoreUnavailableIsTold: a request whose write the store cannot
// commit answers STORE_UNAVAILABLE, not an internal error.
func TestStoreUnavailableIsTold(t *testing.T) {
	mem := store.NewMemory()
	ok := runs.New(runs.Config{Store: mem, Agents: newFakeAgents()})
	defer ok.Close()
	if _, err := ok.Submit(as("alice"), "u", oneStep("u", "echo")); err != nil {
		t.Fatal(err)
	}
	b := runs.New(runs.Config{Store: unwritable{mem}, Agents: newFakeAgents()})
	defer b.Close()
	if _, err := b.Submit(as("alice"), "w", oneStep("w", "echo")); errCode(err) != protocol.StoreUnavailable {
		t.Fatalf("submit: %v", err)
	}
	if _, err := b.Force(as("alice"), "u"); errCode(err) != protocol.StoreUnavailable {
		t.Fatalf("force: %v", err)
	}
}
