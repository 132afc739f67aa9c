package capsule_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/workspace"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// hangGuard bounds every wait of these tests. It is not a timing
// assertion: nothing here should take more than a fraction of it, and
// hitting it means the run is stuck.
const hangGuard = 60 * time.Second

// local is a context carrying the local identity, as the server gives one
// to every call of a local connection.
func local() context.Context { return identity.With(context.Background(), identity.Local()) }

// noClose shares one store between successive capsules (capsule.Close
// closes the store it was given).
type noClose struct{ store.Store }

func (noClose) Close() error { return nil }

// env is one started capsule under test.
type env struct {
	t *testing.T
	c *capsule.Capsule
	b *capsule.Backend
}

func start(t testing.TB, o capsule.Options) *env {
	t.Helper()
	if o.Log == nil {
		o.Log = quietLog()
	}
	c, err := capsule.New(o)
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(func() { _ = c.Close() })
	e := &env{c: c, b: c.Backend()}
	if tt, ok := t.(*testing.T); ok {
		e.t = tt
	}
	return e
}

var keySeq atomic.Uint64

func key() *string {
	k := "k-" + strconv.FormatUint(keySeq.Add(1), 10)
	return &k
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	if b, ok := v.([]byte); ok {
		return b
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// applyErr admits g (a GraphSpec as []byte or a JSON-able value) with input.
func (e *env) applyErr(g any, input string) (*protocol.ApplyResult, error) {
	in, err := protocol.NormalizeValue([]byte(input))
	if err != nil {
		e.t.Fatal(err)
	}
	return e.b.Apply(local(), protocol.ApplyParams{Graph: mustJSON(e.t, g), Input: in, HasInput: true, IdempotencyKey: key()})
}

func (e *env) apply(g any, input string) *protocol.ApplyResult {
	e.t.Helper()
	r, err := e.applyErr(g, input)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			e.t.Fatalf("apply: %v %s", err, pe.Details)
		}
		e.t.Fatalf("apply: %v", err)
	}
	return r
}

func (e *env) get() *protocol.GetResult {
	e.t.Helper()
	r, err := e.b.Get(local(), protocol.GetParams{})
	if err != nil {
		e.t.Fatalf("get: %v", err)
	}
	return r
}

// waitGet polls get after every commit until cond holds.
func (e *env) waitGet(what string, cond func(*protocol.GetResult) bool) *protocol.GetResult {
	e.t.Helper()
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	for {
		changed := e.b.Store().Changed()
		r := e.get()
		if cond(r) {
			return r
		}
		select {
		case <-changed:
		case <-guard.C:
			e.t.Fatalf("stuck waiting for %s; last get: %s", what, mustJSON(e.t, r))
		}
	}
}

func (e *env) waitFinished() *protocol.GetResult {
	e.t.Helper()
	return e.waitGet("finished", func(r *protocol.GetResult) bool { return r.Status.Phase == protocol.PhaseFinished })
}

// event is one watch notification.
type event struct {
	RunID  string `json:"runId"`
	Cursor string `json:"cursor"`
	Event  struct {
		Type        string                  `json:"type"`
		Status      *protocol.ClusterStatus `json:"status"`
		Node        *protocol.NodeRef       `json:"node"`
		Input       json.RawMessage         `json:"input"`
		Outcome     json.RawMessage         `json:"outcome"`
		Fault       json.RawMessage         `json:"fault"`
		FinalStatus *protocol.ClusterStatus `json:"final_status"`
		StopMode    string                  `json:"stop_mode"`
	} `json:"event"`
}

type outcome struct {
	Status  string            `json:"status"`
	Output  json.RawMessage   `json:"output"`
	Signals map[string]string `json:"signals"`
	Code    string            `json:"code"`
	Reason  string            `json:"reason"`
}

type fault struct {
	EventID      string `json:"eventId"`
	ExecutionRef string `json:"executionRef"`
	Code         string `json:"code"`
	Consequence  string `json:"consequence"`
}

func (ev event) outcome(t testing.TB) outcome {
	var o outcome
	if err := json.Unmarshal(ev.Event.Outcome, &o); err != nil {
		t.Fatalf("outcome %s: %v", ev.Event.Outcome, err)
	}
	return o
}

func (ev event) fault(t testing.TB) fault {
	var f fault
	if err := json.Unmarshal(ev.Event.Fault, &f); err != nil {
		t.Fatalf("fault %s: %v", ev.Event.Fault, err)
	}
	return f
}

func (ev event) String() string {
	s := ev.Cursor + " " + ev.Event.Type
	if n := ev.Event.Node; n != nil {
		s += fmt.Sprintf(" %s#%d", n.Node, n.Attempt)
	}
	if len(ev.Event.Outcome) > 0 {
		s += " " + string(ev.Event.Outcome)
	}
	if len(ev.Event.Fault) > 0 {
		s += " " + string(ev.Event.Fault)
	}
	if ev.Event.StopMode != "" {
		s += " stop_mode=" + ev.Event.StopMode
	}
	return s
}

type events []event

func (es events) String() string {
	s := ""
	for _, e := range es {
		s += "\n  " + e.String()
	}
	return s
}

// of returns the events of type typ (and of node, when node is not "").
func (es events) of(typ, node string) events {
	var out events
	for _, e := range es {
		if e.Event.Type == typ && (node == "" || (e.Event.Node != nil && e.Event.Node.Node == node)) {
			out = append(out, e)
		}
	}
	return out
}

func (es events) last() event { return es[len(es)-1] }

func finished(es events) bool { return len(es) > 0 && es.last().Event.Type == protocol.EventFinished }

// watchUntil replays and follows run's events until until holds.
func (e *env) watchUntil(runID string, what string, until func(events) bool) events {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(local(), hangGuard)
	defer cancel()
	sub, err := e.b.Watch(ctx, protocol.WatchParams{RunID: &runID})
	if err != nil {
		e.t.Fatalf("watch: %v", err)
	}
	defer sub.Stream.Close()
	var es events
	for !until(es) {
		n, err := sub.Stream.Next(ctx)
		if err != nil {
			e.t.Fatalf("watch %s waiting for %s: %v; so far:%s", runID, what, err, es)
		}
		if n.Closed != "" {
			e.t.Fatalf("watch closed: %s", n.Closed)
		}
		var ev event
		if err := json.Unmarshal(append([]byte(`{"subscriptionId":"s"`), append(n.Rest, '}')...), &ev); err != nil {
			e.t.Fatalf("event %s: %v", n.Rest, err)
		}
		es = append(es, ev)
	}
	return es
}

// history is every event of a finished run.
func (e *env) history(runID string) events {
	e.t.Helper()
	return e.watchUntil(runID, "finished", finished)
}

// terminal asserts get's terminal result.
func wantTerminal(t testing.TB, r *protocol.GetResult, status, outputOrReason string) {
	t.Helper()
	tr := r.TerminalResult
	if tr == nil {
		t.Fatalf("no terminalResult in %s", mustJSON(t, r))
	}
	got := tr.Reason
	if tr.Output != nil {
		got = string(*tr.Output)
	}
	if tr.Status != status || got != outputOrReason {
		t.Fatalf("terminalResult = %s, want %s %s", mustJSON(t, tr), status, outputOrReason)
	}
}

func (e *env) stop(mode string) (*protocol.StopResult, error) {
	gen := *e.get().Status.ObservedGeneration
	return e.b.Stop(local(), protocol.StopParams{Mode: mode, IfGeneration: gen, IdempotencyKey: *key()})
}

func (e *env) update(suspended bool) {
	e.t.Helper()
	gen := *e.get().Status.ObservedGeneration
	if _, err := e.b.Update(local(), protocol.UpdateParams{Suspended: &suspended, IfGeneration: gen, IdempotencyKey: *key()}); err != nil {
		e.t.Fatalf("update suspended=%v: %v", suspended, err)
	}
}

func (e *env) retry() *protocol.RetryResult {
	e.t.Helper()
	gen := *e.get().Status.ObservedGeneration
	r, err := e.b.Retry(local(), protocol.RetryParams{IfGeneration: gen, IdempotencyKey: *key()})
	if err != nil {
		e.t.Fatalf("retry: %v", err)
	}
	return r
}

func wantAppError(t testing.TB, err error, code string) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.DataCode != code {
		t.Fatalf("error = %v, want %s", err, code)
	}
}

// ---- command workers (small shell scripts) ----

// script writes an executable shell script into dir.
func script(t testing.TB, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

var textType = json.RawMessage(`{"kind":"record","fields":{"text":{"required":true,"type":{"kind":"string"}}}}`)

// stepCmd is a command step worker with input = output = {text}.
func stepCmd(t testing.TB, ref string, argv ...string) worker.CommandSpec {
	t.Helper()
	specs, err := worker.ParseCommandSpecs(mustJSON(t, []any{map[string]any{
		"worker": ref, "kind": "step", "input": textType, "output": textType, "argv": argv,
	}}))
	if err != nil {
		t.Fatal(err)
	}
	return specs[0]
}

// verifierCmd is a command verifier with input {text}, output null and
// signals {verdict: [approved, rejected]}.
func verifierCmd(t testing.TB, ref string, argv ...string) worker.CommandSpec {
	t.Helper()
	specs, err := worker.ParseCommandSpecs(mustJSON(t, []any{map[string]any{
		"worker": ref, "kind": "verifier", "input": textType, "output": json.RawMessage(`{"kind":"null"}`),
		"signals": map[string][]string{"verdict": {"approved", "rejected"}}, "argv": argv,
	}}))
	if err != nil {
		t.Fatal(err)
	}
	return specs[0]
}

// flakyStep fails its first `failures` runs, then echoes its input.
func flakyStep(t testing.TB, ref string, failures int) worker.CommandSpec {
	dir := t.TempDir()
	s := script(t, dir, "flaky.sh", fmt.Sprintf(`n=$(cat %[1]s/count 2>/dev/null || echo 0)
n=$((n+1)); echo $n > %[1]s/count
if [ $n -le %[2]d ]; then echo "failing run $n" >&2; exit 1; fi
cat
`, dir, failures))
	return stepCmd(t, ref, s)
}

// gate is a command step that echoes its input once released.
type gate struct {
	dir  string
	spec worker.CommandSpec
}

func newGate(t testing.TB, ref string) *gate {
	dir := t.TempDir()
	s := script(t, dir, "gate.sh", fmt.Sprintf(`while [ ! -e %[1]s/release ]; do sleep 0.01; done
cat
`, dir))
	return &gate{dir: dir, spec: stepCmd(t, ref, s)}
}

func (g *gate) release(t testing.TB) {
	if err := os.WriteFile(filepath.Join(g.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// awaitRunEnd watches native run id until its watch stream ends.
func awaitRunEnd(t testing.TB, e *env, id string) {
	t.Helper()
	w, err := e.b.Runs().Watch(local(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stream.Close()
	// Not testkit.Bounded: benchmarks call this once per run, and a
	// cleanup each would pile up over b.N runs.
	ctx, cancel := context.WithTimeout(context.Background(), testkit.HangGuard)
	defer cancel()
	for {
		n, err := w.Stream.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n.Closed != "" {
			return
		}
	}
}

// parseHarness is the harness file of one entry, name: entry, parsed.
func parseHarness(tb testing.TB, name string, entry map[string]any) *harness.Config {
	tb.Helper()
	hb, _ := json.Marshal(map[string]any{name: entry})
	h, err := harness.Parse("harness.json", hb)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// reposAt is the repos file naming repo at url, with no forge, parsed.
func reposAt(tb testing.TB, repo, url string) *workspace.Repos {
	tb.Helper()
	rb, _ := json.Marshal(map[string]any{repo: map[string]any{"url": url}})
	repos, err := workspace.ParseRepos("repos.json", rb)
	if err != nil {
		tb.Fatal(err)
	}
	return repos
}
