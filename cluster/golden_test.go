package cluster_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/protocol"
)

// The pure-wire goldens replay byte for byte against --backend fixture
// through a real connection core over NDJSON.

func TestGoldenAdmissionLifecycleThenErrors(t *testing.T) {
	b := cluster.NewFixture(cluster.Isolated)
	w := dial(t, b, identity.Local())
	replayGolden(t, w, "admission-lifecycle.ndjson")
	replayGolden(t, w, "admission-errors.ndjson")
}

func TestGoldenLifecycleResubmit(t *testing.T) {
	w := dial(t, cluster.NewFixture(cluster.Isolated), identity.Local())
	replayGolden(t, w, "lifecycle-resubmit.ndjson")
}

func TestGoldenLifecycleDelete(t *testing.T) {
	w := dial(t, cluster.NewFixture(cluster.Isolated), identity.Local())
	replayGolden(t, w, "lifecycle-delete.ndjson")
}

func TestGoldenHandshakes(t *testing.T) {
	for _, name := range []string{"initialize.ndjson", "get-empty.ndjson", "incompatible-version.ndjson", "invalid-params.ndjson", "malformed-request.ndjson", "rejected-batch.ndjson", "unknown-method.ndjson"} {
		t.Run(name, func(t *testing.T) {
			replayGolden(t, dial(t, cluster.NewFixture(cluster.Isolated), identity.Local()), name)
		})
	}
}

// lifecycle-controls needs a failed turn: between apply and retry the
// reference testkit's hook records the dispatch of turn lifecycle-turn
// (cursor-2) and its retryable failure (cursor-3).
func TestGoldenLifecycleControls(t *testing.T) {
	b := cluster.NewFixture(cluster.Isolated)
	w := dial(t, b, identity.Local())
	pairs := goldenPairs(t, "lifecycle-controls.ndjson")
	if got := w.call(pairs[0][0]); got != pairs[0][1] {
		t.Fatalf("apply:\n got  %s\n want %s", got, pairs[0][1])
	}
	if err := b.FailTurn(bg, "local", "lifecycle-turn"); err != nil {
		t.Fatal(err)
	}
	for i, p := range pairs[1:] {
		if got := w.call(p[0]); got != p[1] {
			t.Fatalf("pair %d:\n got  %s\n want %s", i+1, got, p[1])
		}
	}
}

// sessionParams loads a *-session.json golden as a list of JSON values.
func sessionParams(t *testing.T, name string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	if err := json.Unmarshal(readGolden(t, name), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// notification reads the next frame and returns the params of an event.
func (w *wire) notification(method string) string {
	w.t.Helper()
	frame := w.recv()
	prefix := `{"jsonrpc":"2.0","method":"` + method + `","params":`
	if !strings.HasPrefix(frame, prefix) || !strings.HasSuffix(frame, "}") {
		w.t.Fatalf("not a %s notification: %s", method, frame)
	}
	return strings.TrimSuffix(strings.TrimPrefix(frame, prefix), "}")
}

func TestGoldenWatchSession(t *testing.T) {
	b := cluster.NewFixture(cluster.Isolated)
	w := dial(t, b, identity.Local())
	if got := w.call(`{"jsonrpc":"2.0","id":1,"method":"watch","params":{}}`); got != `{"jsonrpc":"2.0","id":1,"result":{"subscriptionId":"sub-1","runId":null,"atCursor":null}}` {
		t.Fatalf("parked watch: %s", got)
	}
	w.send(`{"jsonrpc":"2.0","id":2,"method":"apply","params":{"graph":` + goldenGraph + `,"input":null,"ifGeneration":0,"idempotencyKey":"watch-create"}}`)
	// The apply response and the admission event may interleave.
	var frames []string
	for range 2 {
		frames = append(frames, w.recv())
	}
	var evFrame string
	for _, f := range frames {
		if strings.Contains(f, `"method":"event"`) {
			evFrame = f
		} else if f != `{"jsonrpc":"2.0","id":2,"result":{"generation":1,"runId":"run-1","phase":"running","deduped":false}}` {
			t.Fatalf("apply: %s", f)
		}
	}
	r := drive(t, b, "local")
	x, err := r.dispatch("worker", protocol.Value(`{"kind":"null"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.succeed(x); err != nil {
		t.Fatal(err)
	}
	want := sessionParams(t, "watch-session.json")
	got := []string{strings.TrimSuffix(strings.TrimPrefix(evFrame, `{"jsonrpc":"2.0","method":"event","params":`), "}"), w.notification("event"), w.notification("event")}
	for i := range want {
		if !sameJSON(t, []byte(got[i]), want[i]) {
			t.Fatalf("event %d:\n got  %s\n want %s", i, got[i], want[i])
		}
	}
	// Wire key order (the session golden is a sorted-key print).
	wantOrder := []string{
		`{"subscriptionId":"sub-1","runId":"run-1","cursor":"cursor-1","event":{"type":"phase","status":{"phase":"running","observedGeneration":1,"currentRunId":"run-1","atCursor":"cursor-1","operational":{"labels":{},"logLevel":"info","dispatchState":"active","inFlight":0}},"admission":{"runId":"run-1","spec":` + goldenGraph + `,"seedInput":null}}}`,
		`{"subscriptionId":"sub-1","runId":"run-1","cursor":"cursor-2","event":{"type":"node_begin","node":{"node":"worker","attempt":1},"input":{"kind":"null"}}}`,
		`{"subscriptionId":"sub-1","runId":"run-1","cursor":"cursor-3","event":{"type":"node_end","node":{"node":"worker","attempt":1},"outcome":{"status":"verified","output":null,"artifacts":[]}}}`,
	}
	for i := range wantOrder {
		if got[i] != wantOrder[i] {
			t.Fatalf("event %d wire order:\n got  %s\n want %s", i, got[i], wantOrder[i])
		}
	}
}

// liveRef is the run reference the ledger's live output of tenant is
// addressed with (logs and agent/attach need no run).
func liveRef(b *cluster.Backend, tenant string) engine.RunRef {
	return engine.RunRef{Tenant: b.TenantKey(tenant)}
}

// expectSession reads one event notification per golden session entry and
// compares them as JSON values.
func expectSession(t *testing.T, w *wire, name string, each func(i int, got string)) {
	t.Helper()
	for i, want := range sessionParams(t, name) {
		got := w.notification("event")
		if !sameJSON(t, []byte(got), want) {
			t.Fatalf("%s %d:\n got  %s\n want %s", name, i, got, want)
		}
		each(i, got)
	}
}

func TestGoldenLogsSession(t *testing.T) {
	b := cluster.New(cluster.Config{Logs: true})
	w := dial(t, b, identity.Local())
	if got := w.call(`{"jsonrpc":"2.0","id":1,"method":"logs","params":{}}`); got != `{"jsonrpc":"2.0","id":1,"result":{"subscriptionId":"sub-1"}}` {
		t.Fatalf("logs: %s", got)
	}
	l, ref := b.Ledger("test"), liveRef(b, "local")
	l.Log(ref, "worker-dispatch", "info", "worker dispatch started")
	l.Log(ref, "worker-dispatch", "warn", "retrying after backoff")
	l.Log(ref, "worker-dispatch", "error", strings.Repeat("x", protocol.MaxLogMessageBytes+1))
	expectSession(t, w, "logs-session.json", func(i int, got string) {
		if i == 0 && got != `{"subscriptionId":"sub-1","record":{"level":"info","target":"worker-dispatch","message":"worker dispatch started"}}` {
			t.Fatalf("wire order: %s", got)
		}
	})
}

// The attach session's working and settled events bracket the execution:
// the ledger publishes them when the execution starts and ends. The
// subscriber attaches between the registration of the execution and its
// working event.
func TestGoldenAgentAttachSession(t *testing.T) {
	b := cluster.New(cluster.Config{AgentAttach: true})
	l, ref := b.Ledger("test"), liveRef(b, "local")
	b.StartExecution("local", "execution-1")
	w := dial(t, b, identity.Local())
	if got := w.call(`{"jsonrpc":"2.0","id":1,"method":"agent/attach","params":{"execution":"execution-1"}}`); got != `{"jsonrpc":"2.0","id":1,"result":{"subscriptionId":"sub-1"}}` {
		t.Fatalf("attach: %s", got)
	}
	l.ExecutionStarted(ref, "execution-1")
	l.Output(ref, "execution-1", "agent dispatch started")
	l.Output(ref, "execution-1", strings.Repeat("y", protocol.MaxAttachOutputBytes+1))
	l.ExecutionEnded(ref, "execution-1")
	expectSession(t, w, "agent-attach-session.json", func(i int, got string) {
		if i == 1 && got != `{"subscriptionId":"sub-1","event":{"type":"output","text":"agent dispatch started"}}` {
			t.Fatalf("wire order: %s", got)
		}
	})
}
