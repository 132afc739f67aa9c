package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/internal/testkit"
)

// fakeCLI is testdata/fake-cli.sh installed as bin/<name> with its state
// directory: turn N prints events/N, runs actions/N and exits with
// exits/N, and records its argv, env, stdin and cwd under calls/.
type fakeCLI struct {
	t    *testing.T
	name string
	dir  string // state directory, holding bin/
	work string // the execution's working directory
	run  string // the run's runtime directory
}

func newFakeCLI(t *testing.T, name string) *fakeCLI {
	t.Helper()
	f := &fakeCLI{t: t, name: name, dir: t.TempDir()}
	f.work, f.run = filepath.Join(f.dir, "work"), filepath.Join(f.dir, "runtime")
	for _, sub := range []string{"calls", "actions", "events", "exits", "work", "runtime", "bin"} {
		if err := os.Mkdir(filepath.Join(f.dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script, err := os.ReadFile("testdata/fake-cli.sh")
	if err != nil {
		t.Fatal(err)
	}
	f.write("count", "0\n")
	f.write("bin/"+name, string(script))
	return f
}

func (f *fakeCLI) write(name, content string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(content), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeCLI) read(name string) string {
	f.t.Helper()
	return testkit.ReadFile(f.t, filepath.Join(f.dir, name))
}

// events sets turn n's stdout.
func (f *fakeCLI) events(n int, lines ...string) {
	f.write("events/"+strconv.Itoa(n), strings.Join(lines, "\n")+"\n")
}

// fixtureTurn runs textStep once with the CLI printing a testdata file
// and requires the verified outcome; it returns the execution's lines.
func (f *fakeCLI) fixtureTurn(file string, b harness.Binding, provider string) *recorder {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		f.t.Fatal(err)
	}
	f.write("events/0", string(data))
	rec := &recorder{}
	if s := f.exec(textStep(f.t), b, provider, `{"text":"draft"}`, rec); s != wantVerified {
		f.t.Fatalf("outcome %s\n%s", s, rec.text())
	}
	return rec
}

func (f *fakeCLI) action(n int, sh string) { f.write("actions/"+strconv.Itoa(n), sh+"\n") }
func (f *fakeCLI) exit(n, code int)        { f.write("exits/"+strconv.Itoa(n), strconv.Itoa(code)+"\n") }

// argv is turn n's arguments; env its environment; stdin its input.
func (f *fakeCLI) argv(n int) []string {
	return strings.Split(strings.TrimSuffix(f.read("calls/"+strconv.Itoa(n)+".argv"), "\n"), "\n")
}

func (f *fakeCLI) env(n int) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(f.read("calls/"+strconv.Itoa(n)+".env")), "\n") {
		k, v, _ := strings.Cut(l, "=")
		switch k {
		case "PWD", "SHLVL", "_", "OLDPWD":
		default:
			m[k] = v
		}
	}
	return m
}

func (f *fakeCLI) stdin(n int) string { return f.read("calls/" + strconv.Itoa(n) + ".stdin") }

func (f *fakeCLI) turns() int {
	n, _ := strconv.Atoi(strings.TrimSpace(f.read("count")))
	return n
}

// runner is a runner over the CLI driver, allowed the env names.
func (f *fakeCLI) runner(env ...string) *harness.Runner {
	f.t.Helper()
	b, _ := json.Marshal(map[string]any{f.name: map[string]any{"argv": []string{filepath.Join(f.dir, "bin", f.name)}, "env": env}})
	c, err := harness.Parse("harness.json", b)
	if err != nil {
		f.t.Fatal(err)
	}
	d, err := c.Driver(f.name)
	if err != nil {
		f.t.Fatal(err)
	}
	return harness.NewRunner(d, 0)
}

// exec runs one execution of node on a fresh runner allowed the binding's
// env names and returns its outcome's JSON.
func (f *fakeCLI) exec(node graph.Node, b harness.Binding, provider, input string, rec *recorder) string {
	return outcome(run(f.runner(b.Env...), context.Background(), f.job(node, b, provider), input, rec))
}

// mustVerify runs textStep once and requires the verified outcome.
func (f *fakeCLI) mustVerify(b harness.Binding, provider string) {
	f.t.Helper()
	rec := &recorder{}
	if s := f.exec(textStep(f.t), b, provider, `{"text":"draft"}`, rec); s != wantVerified {
		f.t.Fatalf("outcome %s\n%s", s, rec.text())
	}
}

func (f *fakeCLI) job(node graph.Node, b harness.Binding, provider string) harness.Job {
	return harness.Job{Key: "run-1", Instance: "7", Execution: "12", Node: node, Binding: b, Provider: provider, Dir: f.work, Runtime: f.run}
}

// codexTurn is a Codex stream: a thread, then each agent message, then
// turn.completed.
func codexTurn(thread string, messages ...string) []string {
	lines := []string{`{"type":"thread.started","thread_id":` + quote(thread) + `}`, `{"type":"turn.started"}`}
	for i, m := range messages {
		lines = append(lines, fmt.Sprintf(`{"type":"item.completed","item":{"id":"item_%d","type":"agent_message","text":%s}}`, i, quote(m)))
	}
	return append(lines, `{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}`)
}

// claudeTurn is a Claude stream: init, the answer as text deltas, then a
// successful result.
func claudeTurn(session, answer string) []string {
	sid := `,"session_id":` + quote(session)
	return []string{
		`{"type":"system","subtype":"init"` + sid + `}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":` + quote(answer) + `}}` + sid + `}`,
		`{"type":"result","subtype":"success","is_error":false,"result":` + quote(answer) + sid + `}`,
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// indexOf is the position of item in argv, or -1.
func indexOf(argv []string, item string) int {
	for i, a := range argv {
		if a == item {
			return i
		}
	}
	return -1
}
