package runs_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store"
)

// leakKey is the declared key of the leak tests. Its standard base64
// holds '+' and '/' ("??>~~~" encodes to "Pz8+fn5+"), so its URL-safe
// spellings differ from the standard ones.
const leakKey = "sk-??>~~~-0123456789-leak"

// leakLines are lines an agent prints, each holding the key in one
// spelling, with what each must be recorded as: the whole encodings, and
// the key inside larger base64 data at each of the three offsets mod 3
// (only the characters the key alone decides are replaced).
func leakLines() (lines, want []string) {
	b := []byte(leakKey)
	whole := map[string]string{
		"plain": leakKey, "hex": hex.EncodeToString(b), "HEX": strings.ToUpper(hex.EncodeToString(b)),
		"base64": base64.StdEncoding.EncodeToString(b), "base64 unpadded": base64.RawStdEncoding.EncodeToString(b),
		"base64url": base64.URLEncoding.EncodeToString(b), "base64url unpadded": base64.RawURLEncoding.EncodeToString(b),
	}
	for _, name := range []string{"plain", "hex", "HEX", "base64", "base64 unpadded", "base64url", "base64url unpadded"} {
		lines, want = append(lines, name+": "+whole[name]), append(want, name+": [REDACTED]")
	}
	for a := range 3 {
		prefix := strings.Repeat("P", 6+a)
		blob := base64.StdEncoding.EncodeToString([]byte(prefix + leakKey + "zz, the rest of a file"))
		first, end := (8*len(prefix)+5)/6, 8*(len(prefix)+len(leakKey))/6
		lines = append(lines, "blob: "+blob)
		want = append(want, "blob: "+blob[:first]+"[REDACTED]"+blob[end:])
	}
	return lines, want
}

// leakingAgent is a host's harness whose one agent, once released, runs a
// program given leakLines' first line on stdin that prints all of them
// on its stdout and its stderr (which is the execution's logs and live
// output).
type leakingAgent struct {
	started chan string
	release chan struct{}
}

func (*leakingAgent) CheckPlan(string, map[string]runs.Binding) error { return nil }

func (a *leakingAgent) RunAgent(ctx context.Context, x runs.AgentExecution) worker.Outcome {
	a.started <- x.Worker.Ref
	select {
	case <-a.release:
	case <-ctx.Done():
		return worker.Failed(worker.CodeRefusal, worker.ReasonDeclaredFailure)
	}
	lines, _ := leakLines()
	text := strings.Join(lines, "\n") + "\n"
	res := worker.Process{Argv: []string{"/bin/sh", "-c", `printf '%s' "$LEAK"; printf '%s' "$LEAK" >&2`},
		Env: []string{"LEAK=" + text}, Stdin: []byte(lines[0]), MaxStdout: 1 << 20, Sinks: x.Worker.Sinks, Tap: x.Worker.Tap}.Run(ctx)
	if res.StartErr != nil || res.Exit != nil {
		return worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure)
	}
	return worker.Outcome{Status: "verified", Output: x.Worker.Input}
}

// An agent that prints its declared key hex- or base64-encoded, alone or
// inside larger base64 data at any alignment, leaves [REDACTED] in its
// place in the run's log records, its live output and the run's export
// (its prompt and both streams, whatever reads cut them).
func TestDeclaredValueEncodingsAreRedactedFromLogsLiveOutputAndExport(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", leakKey)
	agent := &leakingAgent{started: make(chan string, 1), release: make(chan struct{})}
	b := runs.New(runs.Config{Store: store.NewMemory(), Agents: agent, Log: slog.New(slog.DiscardHandler)})
	sup := engine.New(b.Ledger("test-owner"), worker.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sup.Run(ctx) }()
	t.Cleanup(func() { cancel(); testkit.Recv(t, done); b.Close() })

	alice := as("alice")
	sub := strings.Replace(string(oneStep("leak", "leak")), `"model":"gpt-5.6"`, `"model":"gpt-5.6","env":["OPENAI_API_KEY"]`, 1)
	if _, err := b.Submit(alice, "leak", json.RawMessage(sub)); err != nil {
		t.Fatal(err)
	}
	ref := testkit.Recv(t, agent.started)
	attach, err := b.Attach(alice, "leak", ref)
	if err != nil {
		t.Fatal(err)
	}
	close(agent.release)
	live, _ := drain(t, attach)
	if st := waitFinished(t, b, alice, "leak"); st.Phase != runs.PhaseFinished {
		t.Fatalf("run %+v", st)
	}
	logs, err := b.Logs(alice, "leak", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	records, _ := drain(t, logs)
	var trace bytes.Buffer
	if err := b.Export(alice, "leak", "trace", &trace); err != nil {
		t.Fatal(err)
	}

	_, want := leakLines()
	var logged, shown []string
	for _, r := range records {
		logged = append(logged, r["record"].(map[string]any)["message"].(string))
	}
	for _, e := range live {
		if ev := e["event"].(map[string]any); ev["type"] == "output" {
			shown = append(shown, ev["text"].(string))
		}
	}
	prompt, streams := traceOf(t, trace.Bytes())
	for name, got := range map[string]string{"logs": strings.Join(logged, "\n"), "live output": strings.Join(shown, "\n"),
		"export stdout": streams["stdout"], "export stderr": streams["stderr"]} {
		for _, w := range want {
			if !strings.Contains(got, w+"\n") && !strings.HasSuffix(got, w) {
				t.Errorf("%s lacks %q:\n%s", name, w, got)
			}
		}
	}
	if prompt != want[0] {
		t.Errorf("export prompt %q, want %q", prompt, want[0])
	}
	lines, _ := leakLines()
	for _, l := range lines {
		spelling := l[strings.Index(l, ": ")+2:]
		if strings.Contains(trace.String(), spelling) {
			t.Errorf("the export holds %q", spelling)
		}
	}
}

// traceOf reads a trace's prompt and its streams' bytes (one execution,
// one turn); the test's bytes are all UTF-8, so none is base64-encoded.
func traceOf(t *testing.T, trace []byte) (prompt string, streams map[string]string) {
	t.Helper()
	streams = map[string]string{}
	for _, l := range bytes.Split(bytes.TrimSuffix(trace, []byte("\n")), []byte("\n")) {
		var r struct{ Record, Stream, Data, Encoding string }
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("trace line %s: %v", l, err)
		}
		if r.Encoding != "" {
			t.Fatalf("trace line %s is encoded", l)
		}
		switch r.Record {
		case "prompt":
			prompt = r.Data
		case "output":
			streams[r.Stream] += r.Data
		}
	}
	return prompt, streams
}
