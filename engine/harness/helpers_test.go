package harness_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// fakeScript is a command harness for tests: turn N (from 0) saves its
// stdin as calls/N.json, writes "turn N" on stderr, prints answers/N and
// exits with the code in exits/N (default 0).
const fakeScript = `#!/bin/sh
d=$(dirname "$0")
n=$(cat "$d/count")
echo $((n + 1)) > "$d/count"
cat > "$d/calls/$n.json"
echo "turn $n" >&2
cat "$d/answers/$n" 2>/dev/null
exit $(cat "$d/exits/$n" 2>/dev/null || echo 0)
`

// fake is one fake harness directory.
type fake struct {
	t   *testing.T
	dir string
}

func newFake(t *testing.T) *fake {
	t.Helper()
	f := &fake{t: t, dir: t.TempDir()}
	for _, sub := range []string{"calls", "answers", "exits", "work"} {
		if err := os.Mkdir(filepath.Join(f.dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.write("count", "0\n")
	f.write("agent.sh", fakeScript)
	return f
}

func (f *fake) write(name, content string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(content), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

// answer sets turn n's stdout to {"session": session, "text": text}.
func (f *fake) answer(n int, session, text string) {
	b, _ := json.Marshal(map[string]string{"session": session, "text": text})
	f.write(filepath.Join("answers", strconv.Itoa(n)), string(b)+"\n")
}

// request is what the process read on stdin; Effort and Session are nil
// for JSON null.
type request struct {
	Prompt, Node, Model string
	Effort, Session     *string
}

// call returns turn n's stdin.
func (f *fake) call(n int) request {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.dir, "calls", strconv.Itoa(n)+".json"))
	if err != nil {
		f.t.Fatalf("turn %d did not run: %v", n, err)
	}
	var m map[string]*string
	if err := json.Unmarshal(data, &m); err != nil || len(m) != 5 || m["prompt"] == nil || m["node"] == nil || m["model"] == nil {
		f.t.Fatalf("turn %d stdin is not {prompt, node, model, effort, session}: %s", n, data)
	}
	for _, k := range []string{"effort", "session"} {
		if _, ok := m[k]; !ok {
			f.t.Fatalf("turn %d stdin lacks %s: %s", n, k, data)
		}
	}
	return request{*m["prompt"], *m["node"], *m["model"], m["effort"], m["session"]}
}

// turns counts the turns that ran.
func (f *fake) turns() int {
	data, err := os.ReadFile(filepath.Join(f.dir, "count"))
	if err != nil {
		f.t.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return n
}

// config is a harness file declaring "claude" on argv with the env names.
func (f *fake) config(argv []string, env ...string) *harness.Config {
	f.t.Helper()
	b, _ := json.Marshal(map[string]any{"claude": map[string]any{"driver": "command", "argv": argv, "env": env}})
	c, err := harness.Parse("harness.json", b)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *fake) runner(env ...string) *harness.Runner {
	f.t.Helper()
	d, err := f.config([]string{"/bin/sh", filepath.Join(f.dir, "agent.sh")}, env...).Driver("claude")
	if err != nil {
		f.t.Fatal(err)
	}
	return harness.NewRunner(d, 0)
}

func (f *fake) job(node graph.Node, b harness.Binding) harness.Job {
	return harness.Job{Key: "run-1", Instance: "ni-1", Node: node, Binding: b, Dir: filepath.Join(f.dir, "work")}
}

// recorder collects an execution's sink lines.
type recorder struct {
	mu    sync.Mutex
	lines []string // "level: message" for logs, "out: text" for output
	seen  map[string]chan struct{}
}

func (r *recorder) sinks() worker.Sinks {
	return worker.Sinks{
		Log:    func(level, msg string) { r.add(level + ": " + msg) },
		Output: func(text string) { r.add("out: " + text) },
	}
}

func (r *recorder) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	if ch, ok := r.seen[line]; ok {
		close(ch)
		delete(r.seen, line)
	}
}

// await returns a channel closed when line arrives; register it before
// the line can arrive.
func (r *recorder) await(line string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	r.seen[line] = ch
	return ch
}

func (r *recorder) has(line string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if l == line {
			return true
		}
	}
	return false
}

func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

func payload(t *testing.T, s string) graph.PayloadType {
	t.Helper()
	p, err := graph.DecodePayloadType([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func instr(s string) *string { return &s }

// textStep is a step {text: string} -> {text: string} with instructions.
func textStep(t *testing.T) *graph.Step {
	rec := payload(t, `{"kind":"record","fields":{"text":{"type":{"kind":"string"},"required":true}}}`)
	return &graph.Step{Name: "write", Worker: "agent.write@1", Instructions: instr("Rewrite the text."), Input: rec, Output: rec, TimeoutMs: 1000, Attempts: 1}
}

// reviewVerifier is a verifier with signal verdict in {approved, rejected}
// and a {message: string} diagnostic.
func reviewVerifier(t *testing.T) *graph.Verifier {
	return &graph.Verifier{
		Name: "review", Worker: "agent.review@1", Instructions: instr("Review the text."),
		Input:      payload(t, `{"kind":"null"}`),
		Output:     payload(t, `{"kind":"boolean"}`),
		Signals:    map[string][]string{"verdict": {"approved", "rejected"}},
		Diagnostic: payload(t, `{"kind":"record","fields":{"message":{"type":{"kind":"string"},"required":true}}}`),
		TimeoutMs:  1000, Attempts: 1,
	}
}

// outcome is o's wire JSON.
func outcome(o worker.Outcome) string {
	b, err := json.Marshal(o)
	if err != nil {
		return "unmarshalable outcome: " + err.Error()
	}
	return string(b)
}

func run(r *harness.Runner, ctx context.Context, job harness.Job, input string, rec *recorder) worker.Outcome {
	return r.Run(ctx, job, worker.Execution{Ref: "ex-1", Node: job.Node.NodeName(), Attempt: 1, Input: json.RawMessage(input), Sinks: rec.sinks()})
}

// deadlineCtx ends with context.DeadlineExceeded when expire is called, so
// a test decides when the node's timeout passes.
type deadlineCtx struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newDeadlineCtx() *deadlineCtx {
	return &deadlineCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *deadlineCtx) expire()               { c.once.Do(func() { close(c.done) }) }
func (c *deadlineCtx) Done() <-chan struct{} { return c.done }
func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
