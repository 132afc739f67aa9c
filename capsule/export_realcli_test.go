package capsule_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/internal/agenttest"
	"github.com/oecp/oecp/internal/modelapi"
	"github.com/oecp/oecp/internal/testkit"
)

// recordingCLI wraps cli in a script that passes everything through
// unchanged and keeps, for each process N it starts (counted from 0 in
// dir/count), exactly what that process received and printed: its last
// argument in dir/N.last, its stdin in N.stdin, its stdout in N.stdout
// and its stderr in N.stderr. The script may run in the agent sandbox: it
// keeps its copies in its own temporary directory and, before it exits,
// sends them to the recorder at port (startRecorder), so that a process's
// records are complete once it has ended. The returned argv is the
// wrapper and the CLI it runs.
func recordingCLI(t *testing.T, cli string) (argv []string, dir string, port int) {
	t.Helper()
	dir = t.TempDir()
	rec := startRecorder(t, dir, false, func(n int, name string) string { return fmt.Sprintf("%d.%s", n, name) })
	// Installed world-readable, as a sandboxed agent's UID must find it.
	bin := t.TempDir()
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(bin, filepath.Base(cli))
	script := "#!/bin/bash\nset -o pipefail\nport=" + strconv.Itoa(rec) + `
cli=$1
shift
d=$(mktemp -d)
printf '%s' "${!#}" > "$d/last"
cat > "$d/stdin"
mkfifo "$d/fifo"
tee "$d/stderr" < "$d/fifo" >&2 &
copy=$!
"$cli" "$@" < "$d/stdin" 2> "$d/fifo" | tee "$d/stdout"
status=$?
wait "$copy"
exec 3<> "/dev/tcp/127.0.0.1/$port"
tar -b 1 -C "$d" -cf - last stdin stdout stderr >&3
read -r ack <&3
rm -rf "$d"
[ "$ack" = ok ] || exit 99
exit "$status"
`
	if err := os.WriteFile(filepath.Join(dir, "count"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{wrapper, cli}, dir, rec
}

// semanticLine is any line of a semantic view.
type semanticLine struct {
	Record    string          `json:"record"`
	Type      string          `json:"type"`
	Execution string          `json:"execution"`
	Turn      int             `json:"turn"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Status    string          `json:"status"`
	Text      *string         `json:"text"`
	Input     json.RawMessage `json:"input"`
	Output    *string         `json:"output"`
	Usage     json.RawMessage `json:"usage"`
	Complete  bool            `json:"complete"`
	Missing   json.RawMessage `json:"missing"`
	Unparsed  *int            `json:"unparsed"`
}

// userTexts are the texts of every user message the stand-in received:
// the Responses API's input items and the Messages API's messages.
func userTexts(t *testing.T, reqs []modelapi.Request) []string {
	t.Helper()
	type content struct {
		Type, Text string
	}
	type message struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	var out []string
	for _, r := range reqs {
		var body struct{ Input, Messages []message }
		if len(r.Body) == 0 || json.Unmarshal(r.Body, &body) != nil {
			continue
		}
		for _, m := range append(body.Input, body.Messages...) {
			if m.Role != "user" {
				continue
			}
			var s string
			if json.Unmarshal(m.Content, &s) == nil {
				out = append(out, s)
				continue
			}
			var cs []content
			_ = json.Unmarshal(m.Content, &cs)
			for _, c := range cs {
				out = append(out, c.Text)
			}
		}
	}
	return out
}

// jsonl reads stdout as JSONL, one object a line.
func jsonl(t *testing.T, what string, stdout []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(stdout)))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: line %q is not a JSON object: %v", what, sc.Text(), err)
		}
		out = append(out, ev)
	}
	if len(stdout) > 0 && stdout[len(stdout)-1] != '\n' {
		t.Fatalf("%s does not end with a newline", what)
	}
	return out
}

// finalAnswer is, of one process's events, the last answer: Codex's
// last agent message, Claude's result.
func finalAnswer(harness string, evs []map[string]any) string {
	answer := ""
	for _, ev := range evs {
		switch item, _ := ev["item"].(map[string]any); {
		case harness == "codex" && ev["type"] == "item.completed" && item["type"] == "agent_message":
			answer, _ = item["text"].(string)
		case harness == "claude" && ev["type"] == "result":
			answer, _ = ev["result"].(string)
		}
	}
	return answer
}

// hasToolCall reports whether one process's events hold a call of a tool
// (Codex: a command; Claude: a tool_use block) whose input names NOTES.md.
func hasToolCall(harness string, evs []map[string]any) bool {
	for _, ev := range evs {
		item, _ := ev["item"].(map[string]any)
		if harness == "codex" && ev["type"] == "item.completed" && item["type"] == "command_execution" &&
			strings.Contains(fmt.Sprint(item["command"]), "NOTES.md") {
			return true
		}
		msg, _ := ev["message"].(map[string]any)
		blocks, _ := msg["content"].([]any)
		for _, b := range blocks {
			if b, _ := b.(map[string]any); harness == "claude" && ev["type"] == "assistant" && b["type"] == "tool_use" &&
				strings.Contains(fmt.Sprint(b["input"]), "NOTES.md") {
				return true
			}
		}
	}
	return false
}

// A native run of each real CLI, in the agent sandbox, against its model
// API stand-in runs a tool, answers wrongly, is corrected and answers. Its trace holds every
// prompt exactly as the CLI received it (Codex: its stdin; Claude: its
// last argument), the one the model was sent, and every byte the CLI
// wrote on stdout and stderr: each turn's stdout is JSONL holding the
// tool call and the turn's answer. Two exports are byte-identical. The
// semantic view holds the tool call, its result, the answers and each
// turn's usage, with nothing unparsed.
func TestRealAgentRunExport(t *testing.T) {
	const answer = `{"summary":"edited"}`
	for _, ra := range realAgents(modelapi.CodexVersions...) {
		t.Run(ra.name, func(t *testing.T) {
			argv, rec, port := recordingCLI(t, ra.cli(t))
			key := "sk-test-export-" + ra.harness
			t.Setenv(ra.key, key)
			api := ra.api(modelapi.Step{Command: "printf 'improved\\n' > NOTES.md"}, modelapi.Step{Text: "not json"}, modelapi.Step{Text: answer})
			defer api.close()
			confine := func(h *harness.Config, runDir string) *sandbox.Host { return realSandbox(t, h, runDir, api.base, port) }
			h := newAgentHost(t, ra.harness, map[string]any{"argv": argv, "env": ra.env, "baseUrl": api.base}, capsule.Options{}, confine)
			// The writer declares the key alone: a declared value is
			// redacted from the evidence wherever it appears.
			h.submit("rx", agenttest.TwoNodes(t), "null", ra.plan([]string{ra.key}), h.remote.Head())
			if got := h.finish("rx"); got != `{"status":"succeeded","output":null}` {
				t.Fatalf("terminal %s after %d model calls\n%s", got, api.calls(), h.logs("rx"))
			}

			trace := export(t, h, local(), "rx", "trace")
			if again := export(t, h, local(), "rx", "trace"); again != trace {
				t.Fatalf("two trace exports differ:\n%s\n---\n%s", trace, again)
			}
			if strings.Contains(trace, key) {
				t.Fatal("the key is in the trace")
			}
			p := parseTrace(t, trace)
			if !p.footer.Complete || string(p.footer.Missing) != "[]" {
				t.Fatalf("trace footer %+v", p.footer)
			}
			turns := strings.TrimSpace(testkit.ReadFile(t, filepath.Join(rec, "count")))
			if turns != "2" || len(p.prompts) != 2 {
				t.Fatalf("the CLI ran %s times, the trace holds %d prompts\n%s", turns, len(p.prompts), h.logs("rx"))
			}
			sent := userTexts(t, api.requests())
			for turn := range 2 {
				n := filepath.Join(rec, fmt.Sprint(turn))
				want, via := testkit.ReadFile(t, n+".stdin"), "stdin"
				if ra.harness == "claude" {
					want, via = testkit.ReadFile(t, n+".last"), "argv"
				}
				if p.prompts[turn] != want || p.vias[turn] != via || want == "" {
					t.Fatalf("turn %d prompt (%s) %q, the CLI received (%s) %q", turn, p.vias[turn], p.prompts[turn], via, want)
				}
				if !slices.Contains(sent, want) {
					t.Fatalf("turn %d prompt %q is no user message the model was sent: %q", turn, want, sent)
				}
				for _, stream := range []string{"stdout", "stderr"} {
					printed := strings.ReplaceAll(testkit.ReadFile(t, n+"."+stream), key, "[REDACTED]")
					if got := string(p.out[fmt.Sprintf("%d/%s", turn, stream)]); got != printed {
						t.Fatalf("turn %d %s: the trace holds\n%q\nthe CLI printed\n%q", turn, stream, got, printed)
					}
				}
			}
			if !strings.Contains(p.prompts[1], "Validation error:") {
				t.Fatalf("turn 1 is not the correction: %q\n%s", p.prompts[1], h.logs("rx"))
			}
			first, last := jsonl(t, "turn 0 stdout", p.out["0/stdout"]), jsonl(t, "turn 1 stdout", p.out["1/stdout"])
			if !hasToolCall(ra.harness, first) || finalAnswer(ra.harness, first) != "not json" || finalAnswer(ra.harness, last) != answer {
				t.Fatalf("the stdout events lack the tool call or the answers:\n%s---\n%s", p.out["0/stdout"], p.out["1/stdout"])
			}

			sem := export(t, h, local(), "rx", "semantic")
			if again := export(t, h, local(), "rx", "semantic"); again != sem {
				t.Fatalf("two semantic exports differ:\n%s\n---\n%s", sem, again)
			}
			checkRealSemantic(t, sem, "rx/write/1", answer)
		})
	}
}

// checkRealSemantic asserts the semantic view of a real run: a tool call
// writing NOTES.md and its result in turn 0, each turn's usage and
// result, the corrected answer as text and result of turn 1, and a
// footer with nothing missing or unparsed.
func checkRealSemantic(t *testing.T, sem, execution, answer string) {
	t.Helper()
	var evs []semanticLine
	for _, l := range strings.Split(strings.TrimSuffix(sem, "\n"), "\n")[1:] {
		var e semanticLine
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("semantic line %q: %v", l, err)
		}
		if e.Record == "" && (e.Execution != execution || e.Turn < 0 || e.Turn > 1) {
			t.Fatalf("semantic line of another execution or turn: %s", l)
		}
		evs = append(evs, e)
	}
	find := func(match func(e semanticLine) bool) *semanticLine {
		for i := range evs {
			if match(evs[i]) {
				return &evs[i]
			}
		}
		return nil
	}
	call := find(func(e semanticLine) bool {
		return e.Type == "tool_call" && e.Turn == 0 && e.ID != "" && e.Name != "" && strings.Contains(string(e.Input), "NOTES.md")
	})
	if call == nil || find(func(e semanticLine) bool { return e.Type == "tool_result" && e.ID == call.ID && e.Output != nil }) == nil {
		t.Fatalf("no tool call writing NOTES.md with its result:\n%s", sem)
	}
	textIs := func(want string) func(e semanticLine) bool {
		return func(e semanticLine) bool { return e.Text != nil && *e.Text == want }
	}
	for turn, text := range []string{"not json", answer} {
		for kind, ok := range map[string]func(e semanticLine) bool{
			"text":   textIs(text),
			"result": func(e semanticLine) bool { return e.Status == "success" && textIs(text)(e) },
			"usage":  func(e semanticLine) bool { return strings.Contains(string(e.Usage), "input_tokens") },
		} {
			if find(func(e semanticLine) bool { return e.Type == kind && e.Turn == turn && ok(e) }) == nil {
				t.Fatalf("turn %d lacks its %s (text %q):\n%s", turn, kind, text, sem)
			}
		}
	}
	footer := evs[len(evs)-1]
	if footer.Record != "footer" || !footer.Complete || string(footer.Missing) != "[]" || footer.Unparsed == nil || *footer.Unparsed != 0 {
		t.Fatalf("semantic footer %+v:\n%s", footer, sem)
	}
}
