package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
)

// fakeAgents is the host's harnesses in tests: codex is configured and
// allows OPENAI_API_KEY. An agent's behaviour is its instructions:
//
//	echo     answer the input (steps) or the first label of each signal
//	fail     end with crash
//	block    log "blocked", publish "waiting", then wait for release (or
//	         its cancellation, then send its ref on cancelled)
//	spawn    start `sleep 3600` in a process group of its own, pass the
//	         group to Started, then wait for its cancellation and leave
//	         the process running (a worker whose server died)
//	log:N    log N lines, then echo
//	spend    add 0.25 USD to the run's Spending, send "before->after" on
//	         spends, then wait for its cancellation
type fakeAgents struct {
	mu        sync.Mutex
	release   chan struct{}
	started   chan string // execution refs of blocking agents
	spawned   chan *exec.Cmd
	cancelled chan string
	finished  int
	closed    chan string // runs closed (CloseRun), when set
	spends    chan string
}

func newFakeAgents() *fakeAgents {
	return &fakeAgents{release: make(chan struct{}), started: make(chan string, 64), spawned: make(chan *exec.Cmd, 8), cancelled: make(chan string, 64), spends: make(chan string, 8)}
}

func (f *fakeAgents) CloseRun(_, runID string) {
	if f.closed != nil {
		f.closed <- runID
	}
}

func (f *fakeAgents) CheckPlan(harness string, nodes map[string]runs.Binding) error {
	if harness != runs.HarnessCodex {
		return fmt.Errorf("the plan uses harness %q but the server's --harness file does not declare it", harness)
	}
	for name, b := range nodes {
		for _, e := range b.Env {
			if e != "OPENAI_API_KEY" {
				return fmt.Errorf("node %q declares env %q, which the --harness entry does not list", name, e)
			}
		}
	}
	return nil
}

func (f *fakeAgents) RunAgent(ctx context.Context, a runs.AgentExecution) worker.Outcome {
	defer func() { f.mu.Lock(); f.finished++; f.mu.Unlock() }()
	var in *string // nil for a delivery
	switch n := a.Node.(type) {
	case *graph.Step:
		in = n.Instructions
	case *graph.Verifier:
		in = n.Instructions
	}
	if in == nil {
		return answer(a)
	}
	instr := *in
	ex := a.Worker
	switch {
	case instr == "fail":
		return worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure)
	case instr == "spawn":
		cmd := exec.Command("sleep", "3600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure)
		}
		ex.Started(cmd.Process.Pid)
		f.spawned <- cmd
		<-ctx.Done()
		return worker.Failed(worker.CodeRefusal, worker.ReasonDeclaredFailure)
	case instr == "spend":
		before, err := a.Spending.Spent(ctx)
		after, err2 := a.Spending.AddSpent(ctx, 0.25)
		f.spends <- fmt.Sprintf("%v->%v %v %v", before, after, err, err2)
		<-ctx.Done()
		return worker.Failed(worker.CodeRefusal, worker.ReasonDeclaredFailure)
	case instr == "block":
		ex.Sinks.Log("info", "blocked")
		f.started <- ex.Ref
		for {
			select {
			case <-f.release:
				return answer(a)
			case <-ctx.Done():
				select {
				case f.cancelled <- ex.Ref:
				default: // nobody waits for it
				}
				return worker.Failed(worker.CodeRefusal, worker.ReasonDeclaredFailure)
			}
		}
	case strings.HasPrefix(instr, "log:"):
		var n int
		fmt.Sscanf(instr, "log:%d", &n)
		for i := range n {
			ex.Sinks.Log("info", fmt.Sprintf("line %d\nof %s", i, ex.Ref))
		}
	}
	return answer(a)
}

func answer(a runs.AgentExecution) worker.Outcome {
	if v, ok := a.Node.(*graph.Verifier); ok {
		sig := map[string]string{}
		for f, labels := range v.Signals {
			sig[f] = labels[0]
		}
		return worker.Outcome{Status: "verifier", Output: json.RawMessage("null"), Signals: sig, Diagnostic: json.RawMessage("null")}
	}
	return worker.Outcome{Status: "verified", Output: a.Worker.Input}
}

// rig is a backend over a store with a running supervisor.
type rig struct {
	b      *runs.Backend
	agents *fakeAgents
	st     store.Store
}

func newRig(t testing.TB, st store.Store, maxActive int) *rig {
	return newRigWith(t, st, maxActive, nil)
}

// newRigWith is newRig with the host's workspaces.
func newRigWith(t testing.TB, st store.Store, maxActive int, ws runs.Workspaces) *rig {
	t.Helper()
	if st == nil {
		st = store.NewMemory()
	}
	agents := newFakeAgents()
	b := runs.New(runs.Config{Store: st, Agents: agents, Workspaces: ws, Log: slog.New(slog.DiscardHandler)})
	sup := engine.New(b.Ledger("test-owner"), worker.NewRegistry(), slog.New(slog.DiscardHandler))
	sup.SetMaxActive(maxActive)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sup.Run(ctx) }()
	t.Cleanup(func() { cancel(); testkit.Recv(t, done); b.Close() })
	return &rig{b: b, agents: agents, st: st}
}

func as(tenant string) context.Context {
	return identity.With(context.Background(), identity.ConnectionIdentity{Principal: tenant, Tenant: tenant})
}

// step is an agent step with instructions that passes its null input on.
func step(name, instr string) string {
	return `{"kind":"step","name":"` + name + `","worker":"agent.` + name + `@1","instructions":"` + instr +
		`","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":600000,"attempts":1}`
}

// graphOf is a full-profile graph whose root is a seq of children then a
// succeed.
func graphOf(children ...string) string {
	return `{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":{"policy":"policy.default@1","default":"deny"},` +
		`"root":{"kind":"seq","name":"main","state":{"kind":"null"},"promotedStatePaths":[],"children":[` +
		strings.Join(append(children, `{"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}`), ",") + `]}}`
}

// submission builds a RunSubmission binding every named node to codex.
func submission(key, graphJSON string, nodes ...string) json.RawMessage {
	binds := make([]string, len(nodes))
	for i, n := range nodes {
		binds[i] = `"` + n + `":{"kind":"agent","model":"gpt-5.6"}`
	}
	return json.RawMessage(`{"title":"Test run ` + key + `","graph":` + graphJSON + `,"initialInput":null,` +
		`"runtime":{"harness":"codex","provider":"openai","size":"small","nodes":{` + strings.Join(binds, ",") + `}},` +
		`"source":{"repository":"oecp/oecp","branch":"main","revision":"0123456789abcdef0123456789abcdef01234567"},` +
		`"submissionKey":"` + key + `"}`)
}

// oneStep is a submission of a one-step run.
func oneStep(key, instr string) json.RawMessage {
	return submission(key, graphOf(step("work", instr)), "work")
}

// drain reads a subscription to its close and returns the events' params
// and the close reason.
func drain(t testing.TB, sub *server.Subscription) (events []map[string]any, closed string) {
	t.Helper()
	ctx := testkit.Bounded(t)
	for {
		n, err := sub.Stream.Next(ctx)
		if err != nil {
			t.Fatalf("stream ended without a close: %v", err)
		}
		if n.Closed != "" {
			return events, n.Closed
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(`{"subscriptionId":"x"`+string(n.Rest)+`}`), &m); err != nil {
			t.Fatalf("event %s: %v", n.Rest, err)
		}
		events = append(events, m)
	}
}

// waitFinished follows a run's watch to its end and returns its final
// status.
func waitFinished(t testing.TB, b *runs.Backend, ctx context.Context, runID string) runs.RunStatus {
	t.Helper()
	sub, err := b.Watch(ctx, runID, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stream.Close()
	evs, closed := drain(t, sub)
	if closed != "done" || len(evs) == 0 {
		t.Fatalf("watch closed %q after %d events", closed, len(evs))
	}
	st, err := b.Status(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	return st.Status
}

func errCode(err error) string {
	var pe *protocol.Error
	if e, ok := err.(*protocol.Error); ok {
		pe = e
	}
	if pe == nil {
		return fmt.Sprintf("not a protocol error: %v", err)
	}
	return pe.DataCode
}

// forcedLogs forces the run and returns its log records, to the end of
// its logs.
func forcedLogs(t *testing.T, ctx context.Context, b *runs.Backend, id string) []map[string]any {
	t.Helper()
	if _, err := b.Force(ctx, id); err != nil {
		t.Fatal(err)
	}
	sub, err := b.Logs(ctx, id, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines, _ := drain(t, sub)
	return lines
}
