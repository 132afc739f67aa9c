package collectortest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/agenttest"
	"github.com/oecp/oecp/internal/collectortest"
	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/metrics"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/tracing"
	"github.com/oecp/oecp/transport/websocket"
)

// callerTraceparent is the span of the client that submits the runs.
const callerTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// host is a capsule whose codex harness is the replaying fake, serving
// acme/app from a bare remote with the example fake forge, over WebSocket.
type host struct {
	t      *testing.T
	c      *capsule.Capsule
	url    string
	remote *gittest.Remote
	closed bool
}

func startHost(t *testing.T, cli string) *host {
	t.Helper()
	remote := gittest.NewRemote(t)
	hb, _ := json.Marshal(map[string]any{"codex": map[string]any{"argv": []string{cli}, "env": []string{"OPENAI_API_KEY"}}})
	hc, err := harness.Parse("harness.json", hb)
	if err != nil {
		t.Fatal(err)
	}
	c, err := capsule.New(capsule.Options{Harness: hc, Repos: agenttest.Repos(t, remote.Dir), RunDir: t.TempDir(), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	h := &host{t: t, c: c, remote: remote}
	mux := http.NewServeMux()
	mux.Handle("/oecp", &websocket.Handler{Dispatcher: &server.Dispatcher{Backend: c.Backend()}, Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(mux)
	h.url = "ws" + strings.TrimPrefix(srv.URL, "http") + "/oecp"
	t.Cleanup(func() {
		srv.Close()
		h.close()
	})
	return h
}

// close stops the capsule: whatever its engine traced has ended then.
func (h *host) close() {
	if !h.closed {
		h.closed = true
		_ = h.c.Close()
	}
}

// submit submits the two-node run id over WebSocket as a caller whose
// upgrade request names callerTraceparent, and follows it to its end.
func (h *host) submit(id string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.HangGuard)
	defer cancel()
	conn, err := client.Dial(ctx, h.url, client.DialOptions{AllowPlaintext: true, Traceparent: callerTraceparent})
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Call(ctx, "run/submit", twoNodesSubmit(h.t, id, h.remote.Head()), nil); err != nil {
		h.t.Fatalf("run/submit: %v", err)
	}
	local := identity.With(ctx, identity.Local())
	sub, err := h.c.Backend().Runs().Watch(local, id, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	defer sub.Stream.Close()
	for {
		n, err := sub.Stream.Next(ctx)
		if err != nil {
			h.t.Fatalf("watch: %v", err)
		}
		if n.Closed != "" {
			break
		}
	}
	st, err := h.c.Backend().Runs().Status(local, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(st.Status.TerminalResult)
}

// twoNodesSubmit is run/submit's params for the two-node run id on
// acme/app at revision.
func twoNodesSubmit(t *testing.T, id, revision string) map[string]any {
	var graph any
	_ = json.Unmarshal(agenttest.TwoNodes(t), &graph)
	var plan any
	_ = json.Unmarshal([]byte(agenttest.TwoNodesPlan), &plan)
	return map[string]any{"runId": id, "submission": map[string]any{"title": "traced " + id, "graph": graph, "initialInput": nil, "runtime": plan,
		"source": map[string]any{"repository": "acme/app", "branch": "main", "revision": revision}, "submissionKey": id}}
}

// editNotes is the fake agent's edit.
const editNotes = "printf 'improved\\n' > NOTES.md\n"

// agentCLI installs engine/harness's replaying fake as codex: it edits
// NOTES.md, runs one command (whose words and output must never reach a
// span) and answers, reporting usage.
func agentCLI(t *testing.T) string {
	t.Helper()
	return replayingCLI(t, editNotes)
}

// replayingCLI is agentCLI whose turn i runs the shell fragment
// actions[i] (each turn then answers alike).
func replayingCLI(t *testing.T, actions ...string) string {
	t.Helper()
	dir := t.TempDir()
	events := strings.Join([]string{
		`{"type":"thread.started","thread_id":"th-traced"}`,
		`{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"cat private-argument.txt","status":"in_progress"}}`,
		`{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"cat private-argument.txt","aggregated_output":"private-output","exit_code":0,"status":"completed"}}`,
		`{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"{\"summary\":\"edited\"}"}}`,
		`{"type":"turn.completed","usage":{"input_tokens":1000,"cached_input_tokens":400,"output_tokens":50,"reasoning_output_tokens":20}}`,
	}, "\n") + "\n"
	// `oecp serve` checks the CLI with --version when it starts: answered
	// here, so that it takes no turn.
	version := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'codex-cli 0.0.0 (fake)'; exit 0; fi\nexec \"$(dirname \"$0\")/fake-cli.sh\" \"$@\"\n"
	files := map[string]string{"bin/fake-cli.sh": agenttest.FakeCLIScript(t), "bin/codex": version}
	for i, a := range actions {
		files[fmt.Sprintf("actions/%d", i)], files[fmt.Sprintf("events/%d", i)] = a, events
	}
	agenttest.FakeCLIDir(t, dir, files)
	return filepath.Join(dir, "bin", "codex")
}

// tracingOn turns tracing on to endpoint over protocol; the test's
// cleanup turns it off.
func tracingOn(t *testing.T, c tracing.Config) *tracing.Provider {
	t.Helper()
	p, err := tracing.Setup(context.Background(), c, "test")
	if err != nil || p == nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	})
	return p
}

// A native run with a fake agent, submitted by a caller that sent a
// traceparent, reaches the Collector's OTLP receiver (over gRPC and over
// HTTP) as one trace: the run's root span, linked to the run/submit span
// (itself in the caller's trace); under it the workspace's preparation and
// one span per execution; under the step the agent's turn with the GenAI
// attributes and its tool call; under the delivery its push and pull
// request. No span holds what the tool was given or printed.
func TestNativeRunIsOneTrace(t *testing.T) {
	for _, protocol := range []string{tracing.ProtocolGRPC, tracing.ProtocolHTTP} {
		t.Run(protocol, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "sk-test-secret")
			col := collectortest.Start(t)
			endpoint := col.GRPC
			if protocol == tracing.ProtocolHTTP {
				endpoint = col.HTTP
			}
			p := tracingOn(t, tracing.Config{Endpoint: endpoint, Protocol: protocol})
			h := startHost(t, agentCLI(t))
			if got := h.submit("traced"); got != `{"status":"succeeded","output":null}` {
				t.Fatalf("terminal %s", got)
			}
			h.close()
			if err := p.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkRunTrace(t, col.Spans())
		})
	}
}

func checkRunTrace(t *testing.T, spans []collectortest.Span) {
	t.Helper()
	one := func(name string) collectortest.Span {
		t.Helper()
		var found []collectortest.Span
		for _, s := range spans {
			if s.Name == name {
				found = append(found, s)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d spans named %q among %v", len(found), name, names(spans))
		}
		return found[0]
	}
	under := func(child, parent collectortest.Span) {
		t.Helper()
		if child.TraceID != parent.TraceID || child.Parent != parent.SpanID {
			t.Errorf("%q (trace %s, parent %s) is not under %q (trace %s, span %s)", child.Name, child.TraceID, child.Parent, parent.Name, parent.TraceID, parent.SpanID)
		}
	}
	want := func(s collectortest.Span, attrs map[string]string) {
		t.Helper()
		for k, v := range attrs {
			if s.Attrs[k] != v {
				t.Errorf("%q: %s = %q, want %q", s.Name, k, s.Attrs[k], v)
			}
		}
	}
	submit := one("run/submit")
	caller := tracing.Parse(callerTraceparent)
	if submit.TraceID != caller.TraceID().String() || submit.Parent != caller.SpanID().String() || submit.Kind != "Server" {
		t.Errorf("run/submit is not the caller's child: %+v", submit)
	}
	want(submit, map[string]string{"rpc.system": "jsonrpc", "rpc.method": "run/submit"})
	root := one("run")
	if root.Parent != "" || len(root.Links) != 1 || root.Links[0] != submit.SpanID || root.Error {
		t.Errorf("root %+v does not link to run/submit %s", root, submit.SpanID)
	}
	want(root, map[string]string{"oecp.run.id": "traced", "oecp.run.status": "succeeded"})
	if root.Resource["service.name"] != "oecp" {
		t.Errorf("resource %v", root.Resource)
	}
	write, deliver := one("step write"), one("verifier deliver")
	under(write, root)
	under(deliver, root)
	under(one("workspace prepare"), root)
	want(write, map[string]string{"oecp.node": "write", "oecp.outcome": "ok"})
	turn := one("invoke_agent write")
	under(turn, write)
	want(turn, map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "openai", "oecp.harness": "codex",
		"gen_ai.request.model": "gpt-5.6", "gen_ai.usage.input_tokens": "1000", "gen_ai.usage.cache_read.input_tokens": "400",
		"gen_ai.usage.output_tokens": "50", "gen_ai.usage.reasoning.output_tokens": "20", "gen_ai.conversation.id": "th-traced"})
	tool := one("execute_tool shell")
	under(tool, turn)
	want(tool, map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "shell", "oecp.tool.status": "completed"})
	under(one("git push"), deliver)
	under(one("pull request"), deliver)
	for _, s := range spans {
		for k, v := range s.Attrs {
			for _, secret := range []string{"private-argument", "private-output", "sk-test-secret"} {
				if strings.Contains(v, secret) {
					t.Errorf("%q: %s holds %q", s.Name, k, secret)
				}
			}
		}
		if s.Name != "run/submit" && s.TraceID != root.TraceID {
			t.Errorf("%q is in trace %s, not the run's %s", s.Name, s.TraceID, root.TraceID)
		}
	}
}

func names(spans []collectortest.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// A collector that accepts connections and never answers leaves the run
// as it would be without tracing; what could not be exported is counted
// on /metrics.
func TestCollectorThatNeverAnswersLeavesTheRunAlone(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-secret")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }() // read, never answer
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	m := metrics.New()
	before := dropped(t, m)
	// One span exported at a time, two queued: a run makes more.
	tracingOn(t, tracing.Config{Endpoint: "http://" + ln.Addr().String(), Protocol: tracing.ProtocolGRPC, QueueSize: 2, BatchSize: 1, ExportTimeout: time.Second})
	h := startHost(t, agentCLI(t))
	if got := h.submit("unheard"); got != `{"status":"succeeded","output":null}` {
		t.Fatalf("terminal %s", got)
	}
	h.close()
	if n := dropped(t, m) - before; n < 1 {
		t.Fatalf("oecp_trace_spans_dropped_total grew by %v", n)
	}
}

// dropped reads oecp_trace_spans_dropped_total from the registry /metrics
// serves.
func dropped(t *testing.T, m *metrics.Metrics) float64 {
	t.Helper()
	n, ok := testkit.Counter(t, m.Registry(), "oecp_trace_spans_dropped_total", nil)
	if !ok {
		t.Fatal("no oecp_trace_spans_dropped_total on /metrics")
	}
	return n
}
