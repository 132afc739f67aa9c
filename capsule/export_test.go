package capsule_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/engine/harness/sandbox/sandboxtest"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/agenttest"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
	"github.com/oecp/oecp/store/sqlite"
	"github.com/oecp/oecp/transport/exporthttp"
)

// fakeTurn is one process of engine/harness's replaying fake CLI: action
// (a shell fragment; it may print to stderr) runs, then events are printed
// as they are.
type fakeTurn struct{ action, events string }

// fakeCLI installs the replaying fake for the agent sandbox: dir holds
// its turns (actions/N, events/N) and, world-readable, bin/<name>, a
// wrapper that gets its turn number N from the recorder at port
// (startRecorder), runs the fake in a private copy of its state directory
// (the sandbox shows dir read-only) and sends back what the fake recorded
// in calls/, which lands in dir/calls with dir/count turns. Every turn
// also records its last argument in calls/N.prompt (Claude's prompt). An
// action finds a file the test makes later as "$d/go".
func fakeCLI(t *testing.T, name string, turns ...fakeTurn) (cli, dir string, port int) {
	t.Helper()
	dir = t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	port = startRecorder(t, dir, true, func(_ int, file string) string { return filepath.Join("calls", file) })
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	wrapper := "#!/bin/bash\norig=" + quote(dir) + " port=" + strconv.Itoa(port) + " name=" + quote(name) + `
exec 3<> "/dev/tcp/127.0.0.1/$port"
read -r n <&3
s=$(mktemp -d)
mkdir "$s/bin" "$s/calls"
ln -s "$orig/fake-cli.sh" "$s/bin/$name"
for f in actions events exits go; do ln -s "$orig/$f" "$s/$f"; done
echo "$n" > "$s/count"
"$s/bin/$name" "$@" 3>&-
status=$?
tar -b 1 -C "$s/calls" -cf - . >&3
read -r ack <&3
rm -rf "$s"
[ "$ack" = ok ] || exit 99
exit "$status"
`
	files := map[string]string{"fake-cli.sh": agenttest.FakeCLIScript(t), "bin/" + name: wrapper}
	for i, tu := range turns {
		files[fmt.Sprintf("actions/%d", i)] = `eval "last=\${$#}"; printf '%s' "$last" > "$d/calls/$n.prompt"; ` + tu.action + "\n"
		files[fmt.Sprintf("events/%d", i)] = tu.events
	}
	agenttest.FakeCLIDir(t, dir, files)
	return filepath.Join(dir, "bin", name), dir, port
}

// startFakeAgentHost is startAgentHostWith whose agents, fakeCLI's, run
// in the agent sandbox (where the host has one) with the recorder's port
// allowed.
func startFakeAgentHost(t *testing.T, harnessName, cli string, port int, o capsule.Options, env ...string) *agentHost {
	t.Helper()
	confine := func(h *harness.Config, runDir string) *sandbox.Host {
		return sandboxtest.Host(t, sandbox.Config{Hide: []string{runDir}, Programs: h.Programs(), AllowPorts: []int{port}})
	}
	return newAgentHost(t, harnessName, map[string]any{"argv": []string{cli}, "env": env}, o, confine)
}

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// export reads a run's export in format as the caller's tenant.
func export(t *testing.T, h *agentHost, ctx context.Context, id, format string) string {
	t.Helper()
	var b bytes.Buffer
	if err := h.runs().Export(ctx, id, format, &b); err != nil {
		t.Fatalf("export %s: %v", format, err)
	}
	return b.String()
}

// traceLine is any line of a trace.
type traceLine struct {
	Record    string          `json:"record"`
	Execution string          `json:"execution"`
	Turn      int             `json:"turn"`
	Via       string          `json:"via"`
	Stream    string          `json:"stream"`
	Data      string          `json:"data"`
	Encoding  string          `json:"encoding"`
	Complete  bool            `json:"complete"`
	Missing   json.RawMessage `json:"missing"`
}

// parsed is a trace read back: the prompts of each turn, the bytes of
// each turn's streams, and the footer.
type parsed struct {
	kinds   []string
	prompts map[int]string
	vias    map[int]string
	out     map[string][]byte // "turn/stream"
	footer  traceLine
}

func parseTrace(t *testing.T, trace string) parsed {
	t.Helper()
	p := parsed{prompts: map[int]string{}, vias: map[int]string{}, out: map[string][]byte{}}
	for _, l := range strings.Split(strings.TrimSuffix(trace, "\n"), "\n") {
		var tl traceLine
		if err := json.Unmarshal([]byte(l), &tl); err != nil {
			t.Fatalf("trace line %q: %v", l, err)
		}
		p.kinds = append(p.kinds, tl.Record)
		data := []byte(tl.Data)
		if tl.Encoding == "base64" {
			var err error
			if data, err = base64.StdEncoding.DecodeString(tl.Data); err != nil {
				t.Fatal(err)
			}
		}
		switch tl.Record {
		case "prompt":
			p.prompts[tl.Turn], p.vias[tl.Turn] = string(data), tl.Via
		case "output":
			k := fmt.Sprintf("%d/%s", tl.Turn, tl.Stream)
			p.out[k] = append(p.out[k], data...)
		case "footer":
			p.footer = tl
		}
	}
	return p
}

// The Codex run's trace holds, for each of its two turns (the answer and
// the correction), the exact stdin the CLI received and every byte it
// wrote on stdout and stderr (a byte that is not UTF-8 included, the
// declared key redacted); two exports are byte-identical; the semantic
// view holds its text, tool call, tool result, usage and result.
func TestExportCodexRun(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) (store.Store, error){
		"sqlite": func(t *testing.T) (store.Store, error) {
			return sqlite.Open(context.Background(), sqlite.Options{Dir: t.TempDir()})
		},
		"postgres": func(t *testing.T) (store.Store, error) {
			dsn, _ := pgtest.Schema(t)
			return postgres.Open(context.Background(), postgres.Options{DSN: dsn})
		},
	} {
		t.Run(name, func(t *testing.T) {
			st, err := open(t)
			if err != nil {
				t.Fatal(err)
			}
			testExportCodexRun(t, st)
		})
	}
}

func testExportCodexRun(t *testing.T, st store.Store) {
	t.Setenv("OPENAI_API_KEY", "sk-test-secret")
	turn0 := lines(
		`{"type":"thread.started","thread_id":"th-1"}`,
		`{"type":"turn.started"}`,
		`{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"ls","status":"in_progress"}}`,
		`{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"ls","aggregated_output":"NOTES.md\n","exit_code":0,"status":"completed"}}`,
		`{"type":"item.completed","item":{"id":"item_1","type":"reasoning","text":"Notes need work."}}`,
		`{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"not json"}}`,
		`{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":5}}`)
	turn1 := lines(
		`{"type":"thread.started","thread_id":"th-1"}`,
		`{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"{\"summary\":\"edited\"}"}}`,
		`{"type":"turn.completed","usage":{"input_tokens":20,"cached_input_tokens":10,"output_tokens":9}}`)
	cli, dir, port := fakeCLI(t, "codex",
		fakeTurn{`printf 'improved\n' > NOTES.md; printf 'key %s \377\n' "$CODEX_API_KEY" >&2`, turn0},
		fakeTurn{`printf 'second\n' >&2`, turn1})
	h := startFakeAgentHost(t, "codex", cli, port, capsule.Options{Store: st}, "OPENAI_API_KEY")
	h.submit("cx", agenttest.TwoNodes(t), "null", agenttest.TwoNodesPlan, h.remote.Head())
	if got := h.finish("cx"); got != `{"status":"succeeded","output":null}` {
		t.Fatalf("terminal %s\n%s", got, h.logs("cx"))
	}
	trace := export(t, h, local(), "cx", "trace")
	if again := export(t, h, local(), "cx", "trace"); again != trace {
		t.Fatalf("two exports differ:\n%s\n---\n%s", trace, again)
	}
	p := parseTrace(t, trace)
	if p.kinds[0] != "header" || !strings.HasPrefix(trace, `{"record":"header","runId":"cx","format":"trace","version":1}`+"\n") {
		t.Fatalf("trace header: %s", strings.SplitN(trace, "\n", 2)[0])
	}
	if !strings.Contains(trace, `{"record":"ledger","cursor":"v2:1","event":{`) {
		t.Fatalf("trace lacks the ledger:\n%s", trace)
	}
	for turn := range 2 {
		if want := testkit.ReadFile(t, filepath.Join(dir, "calls", fmt.Sprint(turn)+".stdin")); p.prompts[turn] != want || p.vias[turn] != "stdin" {
			t.Fatalf("turn %d prompt (%s) %q, the CLI received %q", turn, p.vias[turn], p.prompts[turn], want)
		}
	}
	if !strings.Contains(p.prompts[1], "Validation error:") {
		t.Fatalf("turn 1 is not the correction: %q", p.prompts[1])
	}
	for k, want := range map[string]string{"0/stdout": turn0, "1/stdout": turn1, "0/stderr": "key [REDACTED] \377\n", "1/stderr": "second\n"} {
		if got := string(p.out[k]); got != want {
			t.Fatalf("%s: trace holds %q, the CLI wrote %q", k, got, want)
		}
	}
	if strings.Contains(trace, "sk-test-secret") || !strings.Contains(trace, `"encoding":"base64"`) {
		t.Fatalf("the key is in the trace, or the non-UTF-8 chunk is not base64:\n%s", trace)
	}
	if !p.footer.Complete || string(p.footer.Missing) != "[]" {
		t.Fatalf("footer %+v", p.footer)
	}

	sem := export(t, h, local(), "cx", "semantic")
	if again := export(t, h, local(), "cx", "semantic"); again != sem {
		t.Fatal("two semantic exports differ")
	}
	ref := "cx/write/1"
	for _, want := range []string{
		`{"type":"tool_call","execution":"` + ref + `","turn":0,"id":"item_0","name":"command_execution","input":{"command":"ls"}}`,
		`{"type":"tool_result","execution":"` + ref + `","turn":0,"id":"item_0","output":"NOTES.md\n"}`,
		`{"type":"thinking","execution":"` + ref + `","turn":0,"text":"Notes need work."}`,
		`{"type":"text","execution":"` + ref + `","turn":0,"text":"not json"}`,
		`{"type":"usage","execution":"` + ref + `","turn":0,"usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":5}}`,
		`{"type":"result","execution":"` + ref + `","turn":0,"status":"success","text":"not json"}`,
		`{"type":"text","execution":"` + ref + `","turn":1,"text":"{\"summary\":\"edited\"}"}`,
		`{"type":"result","execution":"` + ref + `","turn":1,"status":"success","text":"{\"summary\":\"edited\"}"}`,
		`{"record":"footer","complete":true,"missing":[],"unparsed":0}`,
	} {
		if !strings.Contains(sem, want+"\n") {
			t.Fatalf("semantic view lacks %s:\n%s", want, sem)
		}
	}
}

// The Claude run's trace holds each prompt exactly as the CLI received it
// (its last argument) and its whole stream; the semantic view holds its
// thinking, text, tool call, tool result, usage and result, and counts
// the line it could not read.
func TestExportClaudeRun(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test")
	sid := `"session_id":"s-1"`
	turn0 := lines(
		`{"type":"system","subtype":"init",`+sid+`}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"I read"}},`+sid+`}`,
		`{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"Look first."},{"type":"text","text":"I read the notes."},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"NOTES.md"}}]},`+sid+`}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"old notes"}],"is_error":false}]},`+sid+`}`,
		`{"type":"assistant","message":{"content":[{"type":"text","text":"{\"summary\":\"edited\"}"}]},`+sid+`}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"{\"summary\":\"edited\"}","usage":{"input_tokens":3,"output_tokens":7},"total_cost_usd":0.25,`+sid+`}`)
	cli, dir, port := fakeCLI(t, "claude", fakeTurn{`printf 'improved\n' > NOTES.md; printf 'stderr line\n' >&2`, turn0})
	h := startFakeAgentHost(t, "claude", cli, port, capsule.Options{}, "ANTHROPIC_API_KEY")
	plan := `{"harness":"claude","provider":"anthropic","size":"small","nodes":{"write":{"kind":"agent","model":"claude-sonnet-5","env":["ANTHROPIC_API_KEY"]},"deliver":{"kind":"git_delivery"}}}`
	h.submit("cl", agenttest.TwoNodes(t), "null", plan, h.remote.Head())
	if got := h.finish("cl"); got != `{"status":"succeeded","output":null}` {
		t.Fatalf("terminal %s\n%s", got, h.logs("cl"))
	}
	p := parseTrace(t, export(t, h, local(), "cl", "trace"))
	if want := testkit.ReadFile(t, filepath.Join(dir, "calls", "0.prompt")); p.prompts[0] != want || p.vias[0] != "argv" || !strings.Contains(want, "Improve NOTES.md.") {
		t.Fatalf("prompt (%s) %q, the CLI received %q", p.vias[0], p.prompts[0], want)
	}
	if string(p.out["0/stdout"]) != turn0 || string(p.out["0/stderr"]) != "stderr line\n" || !p.footer.Complete {
		t.Fatalf("trace output %q / %q, footer %+v", p.out["0/stdout"], p.out["0/stderr"], p.footer)
	}
	sem := export(t, h, local(), "cl", "semantic")
	ref := `"execution":"cl/write/1","turn":0`
	for _, want := range []string{
		`{"type":"thinking",` + ref + `,"text":"Look first."}`,
		`{"type":"text",` + ref + `,"text":"I read the notes."}`,
		`{"type":"tool_call",` + ref + `,"id":"toolu_1","name":"Read","input":{"file_path":"NOTES.md"}}`,
		`{"type":"tool_result",` + ref + `,"id":"toolu_1","output":"old notes"}`,
		`{"type":"usage",` + ref + `,"usage":{"input_tokens":3,"output_tokens":7},"costUsd":0.25}`,
		`{"type":"result",` + ref + `,"status":"success","text":"{\"summary\":\"edited\"}"}`,
		`{"record":"footer","complete":true,"missing":[],"unparsed":0}`,
	} {
		if !strings.Contains(sem, want+"\n") {
			t.Fatalf("semantic view lacks %s:\n%s", want, sem)
		}
	}
}

// A run still going exports as far as it got, with a footer that says it
// is incomplete (the run, and the process still running); once it has
// finished the export is complete. Another tenant's export is NOT_FOUND,
// and once retention deleted the run it is GONE.
func TestExportLiveRunOtherTenantAndRetention(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test")
	events := lines(`{"type":"thread.started","thread_id":"th-1"}`,
		`{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"{\"summary\":\"edited\"}"}}`, `{"type":"turn.completed"}`)
	cli, dir, port := fakeCLI(t, "codex", fakeTurn{`printf 'improved\n' > NOTES.md; printf 'started\n' >&2; while [ ! -f "$d/go" ]; do sleep 0.01; done`, events})
	h := startFakeAgentHost(t, "codex", cli, port, capsule.Options{}, "OPENAI_API_KEY")
	h.submit("live", agenttest.TwoNodes(t), "null", agenttest.TwoNodesPlan, h.remote.Head())

	// The agent is running once its stderr line is in the logs.
	logs, err := h.runs().Logs(local(), "live", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	readEvents(t, logs, func(ev string) bool { return strings.Contains(ev, "started") && strings.Contains(ev, "live/write/1") })
	logs.Stream.Close()
	p := parseTrace(t, export(t, h, local(), "live", "trace"))
	if p.footer.Complete || !strings.Contains(string(p.footer.Missing), `{"reason":"run_active"}`) ||
		!strings.Contains(string(p.footer.Missing), `{"reason":"unfinished","execution":"live/write/1","turn":0}`) {
		t.Fatalf("live footer %+v", p.footer)
	}
	if !strings.Contains(p.prompts[0], "Improve NOTES.md.") {
		t.Fatalf("live trace lacks the prompt: %+v", p.prompts)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.finish("live")
	if p := parseTrace(t, export(t, h, local(), "live", "trace")); !p.footer.Complete {
		t.Fatalf("finished footer %+v", p.footer)
	}

	other := identity.With(context.Background(), identity.ConnectionIdentity{Principal: "mallory", Tenant: "other"})
	err = h.runs().Export(other, "live", "trace", &bytes.Buffer{})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.DataCode != protocol.NotFound {
		t.Fatalf("another tenant's export: %v, want NOT_FOUND", err)
	}
	if err := h.runs().Export(local(), "live", "yaml", &bytes.Buffer{}); !errors.As(err, &pe) || pe.DataCode != protocol.SchemaViolation {
		t.Fatalf("an unknown format: %v", err)
	}

	if _, err := h.runs().Compact(context.Background(), time.Now().Add(time.Hour), 32); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := h.runs().Export(local(), "live", "trace", &out); !errors.As(err, &pe) || pe.DataCode != protocol.Gone || out.Len() != 0 {
		t.Fatalf("export of a deleted run: %v (wrote %q), want GONE", err, out.String())
	}
	mux := http.NewServeMux()
	mux.Handle(exporthttp.Path, exporthttp.Handler(h.runs(), nil, 0, quietLog()))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/oecp/runs/live/export?format=trace", nil))
	if rec.Code != http.StatusGone || rec.Body.String() != `{"error":{"code":"GONE","message":"`+protocol.MsgRunGone+`"}}`+"\n" {
		t.Fatalf("GET a deleted run's export: %d %s", rec.Code, rec.Body.String())
	}
	if err := h.runs().Export(local(), "never", "trace", &out); !errors.As(err, &pe) || pe.DataCode != protocol.NotFound {
		t.Fatalf("export of an unknown run: %v, want NOT_FOUND", err)
	}
}
