package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oecp/oecp/internal/agenttest"
	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/internal/testkit"
)

// templateHost is a server whose harness runs testdata/template-agent.sh
// as the codex or claude CLI (with the harness's key variable set to a
// dummy), serving repository acme/app from a bare remote through the
// example fake forge (examples/agents/bin/gh).
type templateHost struct {
	srv    *testServer
	remote *gittest.Remote
	source string // acme/app@main:<head>
}

func startTemplateHost(t *testing.T, harness string) *templateHost {
	t.Helper()
	return startAgentHost(t, harness, "testdata/template-agent.sh")
}

// startAgentHost is startTemplateHost with the agent script and the
// server's extra flags given.
func startAgentHost(t *testing.T, harness, agentScript string, serveFlags ...string) *templateHost {
	t.Helper()
	return startAgentHostArgv(t, harness, agentScript, nil, serveFlags...)
}

// startAgentHostArgv is startAgentHost with the harness entry's argv made
// by argv from the directory and the agent's path (nil: the agent alone).
func startAgentHostArgv(t *testing.T, harness, agentScript string, argv func(dir, agent string) []string, serveFlags ...string) *templateHost {
	t.Helper()
	dir := t.TempDir()
	// World-readable, so that the agent runs in the sandbox under any UID.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(dir, harness)
	if err := os.WriteFile(agent, []byte(testkit.ReadFile(t, agentScript)), 0o755); err != nil {
		t.Fatal(err)
	}
	key := harnessDefaults[harness].env
	t.Setenv(key, "dummy-key")
	remote := gittest.NewRemote(t)
	entry := []string{agent}
	if argv != nil {
		entry = argv(dir, agent)
	}
	files := map[string]any{
		"harness.json": map[string]any{harness: map[string]any{"argv": entry, "env": []string{key}}},
		"repos.json":   agenttest.ReposFile(t, remote.Dir),
	}
	for name, v := range files {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := startServer(t, append([]string{"--harness", filepath.Join(dir, "harness.json"), "--repos", filepath.Join(dir, "repos.json")}, serveFlags...)...)
	return &templateHost{srv: srv, remote: remote, source: "acme/app@main:" + remote.Head()}
}

// runBranch is the branch delivery pushed (the one oecp/run-… ref of the
// remote).
func (h *templateHost) runBranch(t *testing.T) string {
	t.Helper()
	refs := h.remote.Git(h.remote.Dir, "for-each-ref", "--format=%(refname)", "refs/heads/")
	for _, ref := range strings.Fields(refs) {
		if ref != "refs/heads/main" {
			return ref
		}
	}
	t.Fatalf("no run branch in the remote: %s", refs)
	return ""
}

// The task of the end-to-end tests: Markdown with quotes, backslashes,
// a shell substitution and a JSON-looking line, which must reach the agent
// as it was written.
const e2eTask = "# Add a CHANGE.md\n\nSay \"why\" in it; keep `$(rm -rf /)` and C:\\path as text.\n{\"task\": \"not this\"}\n"

// TestCLITemplateSubmitRepairsThenOpensPullRequest: run submit --template
// software-change --task @FILE --pr --harness codex --watch, against a
// server whose agent CLI is a fake: the code verifier rejects the first
// change, the repair agent revises it, both verifiers judge it again and
// accept, and delivery opens a pull request; the run succeeds with it.
// The task reached the agent verbatim, as a JSON string of its input.
func TestCLITemplateSubmitRepairsThenOpensPullRequest(t *testing.T) {
	h := startTemplateHost(t, "codex")
	taskFile := filepath.Join(t.TempDir(), "TASK.md")
	if err := os.WriteFile(taskFile, []byte(e2eTask), 0o644); err != nil {
		t.Fatal(err)
	}
	r := oecp(t, h.srv, "run", "submit", "--template", "software-change", "--task", "@"+taskFile, "--pr", "--harness", "codex",
		"--source", h.source, "--id", "tpl-pr", "--watch", "--timestamps=false")
	expect(t, r, 0, []string{
		`"Add a CHANGE.md", source ` + h.source,
		"implement ended (execution tpl-pr/implement/1): succeeded",
		"code ended (execution tpl-pr/code/1): succeeded",
		"repair ended (execution tpl-pr/repair/1): succeeded",
		"code ended (execution tpl-pr/code/2): succeeded",
		"acceptance ended (execution tpl-pr/acceptance/2): succeeded",
		"deliver ended (execution tpl-pr/deliver/1): succeeded",
		"run tpl-pr succeeded",
		`output: {"pullRequest":"1","summary":"CHANGE.md revision 2"}`,
	}, nil)
	if strings.Contains(r.stdout, "tpl-pr/code/3") || strings.Contains(r.stdout, "repair/2") {
		t.Errorf("more rounds than one rejection needs:\n%s", r.stdout)
	}
	head := h.remote.Ref(h.runBranch(t))
	change, ok := h.remote.Show(head, "CHANGE.md")
	if !ok || change != "- revision 1\n- revision 2\n" {
		t.Fatalf("delivered CHANGE.md %q", change)
	}
	prompt, _ := h.remote.Show(head, "PROMPT.txt")
	want, _ := json.Marshal(map[string]string{"task": e2eTask})
	if quoted := strings.TrimSuffix(strings.TrimPrefix(string(want), `{"task":`), "}"); !strings.Contains(prompt, `"task":`+quoted) {
		t.Fatalf("the implementer's prompt lacks the task %s:\n%s", quoted, prompt)
	}
	// The watch says what became of each agent; logs hold the verdicts.
	logs := oecp(t, h.srv, "run", "logs", "tpl-pr")
	expect(t, logs, 0, []string{"Code review: rejected.", "Repaired: CHANGE.md revision 2.", "Code review: accepted."}, nil)
}

// TestCLITemplateSingleWorkerOnClaude: the single-worker template with
// --harness claude and a model per role: the one agent carries out the
// task and the run succeeds with its summary; --json prints the
// submission's result and the watch's events for scripts.
func TestCLITemplateSingleWorkerOnClaude(t *testing.T) {
	h := startTemplateHost(t, "claude")
	r := oecp(t, h.srv, "run", "submit", "--template", "single-worker", "--task", "Write CHANGE.md.", "--harness", "claude",
		"--model", "worker=claude-opus-5", "--source", h.source, "--id", "tpl-one", "--watch", "--timestamps=false")
	expect(t, r, 0, []string{`"Write CHANGE.md.", source`, "worker ended (execution tpl-one/worker/1): succeeded",
		`output: {"summary":"CHANGE.md revision 1"}`}, nil)
	r = oecp(t, h.srv, "run", "status", "tpl-one", "--json")
	var st struct {
		Title  string
		Status struct{ TerminalResult struct{ Status string } }
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Title != "Write CHANGE.md." || st.Status.TerminalResult.Status != "succeeded" {
		t.Fatalf("status --json %s: %v", r.stdout, err)
	}
}

// TestCLITemplateDeliveryRefusals: single-worker has no delivery, so --pr
// and --ship are a clear usage error (exit 2) before anything is dialled,
// in run submit and in template show; so are --pr with --ship, --pr with
// a graph file, and a template without a task.
func TestCLITemplateDeliveryRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "submit", "--template", "single-worker", "--task", "x", "--pr", "--harness", "codex", "--source", testSource},
			"single-worker has no delivery, so it takes neither --pr nor --ship"},
		{[]string{"run", "submit", "--template", "single-worker", "--task", "x", "--ship", "--harness", "codex", "--source", testSource},
			"single-worker has no delivery"},
		{[]string{"template", "show", "single-worker", "--pr"}, "single-worker has no delivery"},
		{[]string{"run", "submit", "--template", "software-change", "--task", "x", "--pr", "--ship", "--harness", "codex", "--source", testSource},
			"--pr and --ship exclude each other"},
		{[]string{"run", "submit", "-f", stepGraph, "--pr", "--harness", "codex", "--source", testSource}, "--pr and --ship choose the delivery of a --template graph"},
		{[]string{"run", "submit", "--template", "software-change", "--harness", "codex", "--source", testSource}, "give the task of --template software-change with --task"},
		{[]string{"run", "submit", "--template", "software-change", "--task", "x", "--source", testSource}, "--harness codex|claude"},
		{[]string{"run", "submit", "--template", "nope", "--task", "x", "--harness", "codex", "--source", testSource}, `no such template "nope"`},
		{[]string{"run", "submit", "--template", "software-change", "--task", "x", "--harness", "codex", "--model", "reviewer=gpt-5.6", "--source", testSource},
			`"reviewer" is neither a role (worker, verifier) nor an agent node`},
		{[]string{"run", "submit", "--template", "software-change", "--task", " ", "--harness", "codex", "--source", testSource}, "invalid task: it is empty"},
	} {
		r := oecp(t, nil, tc.args...)
		expect(t, r, 2, nil, []string{tc.want})
		if r.stdout != "" {
			t.Errorf("%v wrote to stdout: %s", tc.args, r.stdout)
		}
	}
}

// TestCLITemplateShowPlans: every template `template show` prints, with
// every delivery it takes, is a graph `oecp plan -f` accepts (a native
// graph, checked without a server); a changed copy that breaks a native
// rule is rejected with the reason (exit 1).
func TestCLITemplateShowPlans(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"single-worker"}, {"software-change"}, {"software-change", "--pr"}, {"software-change", "--ship"}} {
		r := oecp(t, nil, append([]string{"template", "show"}, args...)...)
		expect(t, r, 0, []string{`"profile": "openengine.graph.full/v1"`}, nil)
		file := filepath.Join(dir, strings.Join(args, "")+".json")
		if err := os.WriteFile(file, []byte(r.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		expect(t, oecp(t, nil, "plan", "-f", file), 0, []string{"graph is valid", "max node executions:"}, nil)
		r = oecp(t, nil, "plan", "-f", file, "--json")
		var p struct {
			OK     bool
			Bounds json.RawMessage
		}
		if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || !p.OK || len(p.Bounds) == 0 {
			t.Errorf("plan --json of %v: %s %v", args, r.stdout, err)
		}
	}
	shown := oecp(t, nil, "template", "show", "software-change", "--pr").stdout
	broken := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(broken, []byte(strings.Replace(shown, `"attempts": 1`, `"attempts": 2`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, oecp(t, nil, "plan", "-f", broken), 1, []string{"graph is invalid", `executable "implement" must declare attempts 1`}, []string{"the graph was rejected"})
	// The agents example plans too, where the server's plan cannot
	// resolve its agents.
	expect(t, oecp(t, nil, "plan", "-f", "../../examples/agents/review-loop.json"), 0, []string{"graph is valid"}, nil)
}

// TestCLITemplateList: template list names each template, its agent
// nodes and deliveries; --json is one array for scripts; help works for
// the group's commands.
func TestCLITemplateList(t *testing.T) {
	expect(t, oecp(t, nil, "template", "list"), 0, []string{"single-worker\n", "software-change\n",
		"agent nodes: implement, acceptance, code, repair", "--ship:", "(adds deliver, delivery_repair)", "refuses --pr and --ship"}, nil)
	r := oecp(t, nil, "template", "list", "--json")
	var list []struct {
		Name       string
		Deliveries []string
		Agents     []string
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 2 || list[1].Name != "software-change" ||
		strings.Join(list[1].Deliveries, ",") != "pr,ship" || strings.Join(list[0].Agents, ",") != "worker" {
		t.Fatalf("template list --json: %s %v", r.stdout, err)
	}
	expect(t, oecp(t, nil, "help", "template", "show"), 0, []string{"usage: oecp template show NAME [--pr | --ship]"}, nil)
	expect(t, oecp(t, nil, "template"), 2, nil, []string{"usage: oecp template <command>"})
	expect(t, oecp(t, nil, "template", "lst"), 2, nil, []string{`unknown command "lst"`, "Did you mean 'oecp template list'?"})
	expect(t, oecp(t, nil, "help", "run", "submit"), 0, []string{"--template NAME", "--task TEXT", "--harness HARNESS", "--model MODEL"}, nil)
}
