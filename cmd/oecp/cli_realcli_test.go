package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oecp/oecp/internal/agenttest"
	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/internal/modelapi"
)

// The phrases of the software-change agents' instructions that name each
// agent in its model calls.
const (
	roleImplementer = "You are the implementer"
	roleAcceptance  = "You are the acceptance reviewer"
	roleCode        = "You are the code reviewer"
	roleRepairer    = "You are repairing"
)

// realFeedback is the acceptance reviewer's first verdict: the repairer
// must see it.
const realFeedback = "Rejected: NOTES.md lacks its second line, which says second."

// realVerdict is a verifier's answer in the template's contract.
func realVerdict(v, message string) modelapi.Step {
	b, _ := json.Marshal(map[string]any{"output": nil, "signals": map[string]string{"verdict": v}, "diagnostic": map[string]string{"message": message}})
	return modelapi.Step{Text: string(b)}
}

// softwareChangeScript routes each software-change agent's model calls to
// its own script through route: the implementer writes NOTES.md with its shell
// tool, the acceptance reviewer rejects it once, the repairer appends a
// line, and both reviewers accept. The repairer comes first: a call
// naming it and another agent (a resumed conversation) is its own.
func softwareChangeScript(route func(match string, steps ...modelapi.Step)) {
	route(roleRepairer, modelapi.Step{Command: "printf 'second\\n' >> NOTES.md"}, modelapi.Step{Text: `{"summary":"NOTES.md has two lines."}`})
	route(roleAcceptance, realVerdict("rejected", realFeedback), realVerdict("accepted", "Accepted: both lines are there."))
	route(roleCode, realVerdict("accepted", "Accepted: fine."), realVerdict("accepted", "Accepted: still fine."))
	route(roleImplementer, modelapi.Step{Command: "printf 'first\\n' > NOTES.md"}, modelapi.Step{Text: `{"summary":"NOTES.md has its first line."}`})
}

// realStandIn is a model API stand-in for a real CLI's harness.
type realStandIn struct {
	base       string
	route      func(match string, steps ...modelapi.Step)
	requests   func() []modelapi.Request
	unscripted func() int
}

// realCLI is a real CLI and a started stand-in of its provider's model
// API.
type realCLI struct {
	harness string
	cli     func(t *testing.T) string
	api     func(t *testing.T) realStandIn
}

// realCLIs are real Codex (its Responses WebSocket served) and real Claude
// Code.
func realCLIs() []realCLI {
	return []realCLI{
		{"codex", func(t *testing.T) string { return modelapi.CLI(t, "codex", modelapi.CodexNew) }, func(t *testing.T) realStandIn {
			o := modelapi.NewOpenAI(modelapi.WSServe)
			t.Cleanup(o.Close)
			return realStandIn{o.BaseURL(), o.Route, o.Requests, o.Unscripted}
		}},
		{"claude", func(t *testing.T) string { return modelapi.CLI(t, "claude-code", modelapi.ClaudeVersion) }, func(t *testing.T) realStandIn {
			a := modelapi.NewAnthropic()
			t.Cleanup(a.Close)
			return realStandIn{a.URL, a.Route, a.Requests, a.Unscripted}
		}},
	}
}

// softwareChangeHost starts a stand-in of c's provider, scripted with
// softwareChangeScript, and a host whose harness runs c's CLI against it.
func (c realCLI) softwareChangeHost(t *testing.T) (*templateHost, realStandIn) {
	t.Helper()
	cli := c.cli(t)
	api := c.api(t)
	softwareChangeScript(api.route)
	return startRealHost(t, c.harness, cli, api.base), api
}

// startRealHost is a server whose harness entry for harness runs the real
// CLI at cli against the stand-in (its baseUrl, whose loopback port the
// agent sandbox allows), serving acme/app from a bare remote through the
// example fake forge.
func startRealHost(t *testing.T, harness, cli, base string) *templateHost {
	t.Helper()
	dir := t.TempDir()
	gh := agenttest.FakeGH(t)
	key := harnessDefaults[harness].env
	t.Setenv(key, "sk-test-"+harness)
	remote := gittest.NewRemote(t)
	files := map[string]any{
		"harness.json": map[string]any{harness: map[string]any{"argv": []string{cli}, "env": []string{key}, "baseUrl": base}},
		"repos.json":   map[string]any{"acme/app": map[string]any{"url": remote.Dir, "forge": map[string]any{"argv": []string{gh, "--remote", remote.Dir}}}},
	}
	for name, v := range files {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := startServer(t, "--harness", filepath.Join(dir, "harness.json"), "--repos", filepath.Join(dir, "repos.json"))
	return &templateHost{srv: srv, remote: remote, source: "acme/app@main:" + remote.Head()}
}

// TestCLIRealAgentsSoftwareChangeRepairsThenOpensPullRequest: run submit
// --template software-change --pr --watch with the real Codex and the real
// Claude Code, in the agent sandbox, against the model API stand-ins,
// which answer each agent by the role its prompt names (the two reviewers
// call at the same time): the implementer writes NOTES.md through the
// CLI's shell tool, the acceptance reviewer rejects it, the repairer, who
// was given that feedback, appends to it, both reviewers accept, and the
// pull request is opened through the fake forge; the run succeeds and its
// branch holds both edits. Every model call took a step of its agent's
// script: none was answered outside it.
func TestCLIRealAgentsSoftwareChangeRepairsThenOpensPullRequest(t *testing.T) {
	for _, tc := range realCLIs() {
		t.Run(tc.harness, func(t *testing.T) {
			h, api := tc.softwareChangeHost(t)
			r := oecp(t, h.srv, "run", "submit", "--template", "software-change", "--task", "Add a NOTES.md with two lines.", "--pr",
				"--harness", tc.harness, "--source", h.source, "--id", "real", "--watch", "--timestamps=false")
			expect(t, r, 0, []string{
				"implement ended (execution real/implement/1): succeeded",
				"acceptance ended (execution real/acceptance/1): succeeded",
				"repair ended (execution real/repair/1): succeeded",
				"acceptance ended (execution real/acceptance/2): succeeded",
				"code ended (execution real/code/2): succeeded",
				"deliver ended (execution real/deliver/1): succeeded",
				"run real succeeded",
				`output: {"pullRequest":"1","summary":"NOTES.md has two lines."}`,
			}, nil)
			if t.Failed() {
				t.Fatalf("logs:\n%s", oecp(t, h.srv, "run", "logs", "real").stdout)
			}
			if strings.Contains(r.stdout, "real/repair/2") || strings.Contains(r.stdout, "real/acceptance/3") {
				t.Errorf("more rounds than one rejection needs:\n%s", r.stdout)
			}
			notes, ok := h.remote.Show(h.remote.Ref(h.runBranch(t)), "NOTES.md")
			if !ok || notes != "first\nsecond\n" {
				t.Fatalf("the run's branch has NOTES.md %q, want both edits", notes)
			}
			assertRolesReached(t, api.requests())
			if n := api.unscripted(); n != 0 {
				t.Errorf("%d model calls found no step of their agent's script", n)
			}
		})
	}
}

// assertRolesReached checks what reached the stand-in: every agent's
// prompt, and the acceptance reviewer's feedback in the repairer's.
func assertRolesReached(t *testing.T, reqs []modelapi.Request) {
	t.Helper()
	seen := map[string]int{}
	feedback := false
	for _, r := range reqs {
		for _, role := range []string{roleImplementer, roleAcceptance, roleCode, roleRepairer} {
			if strings.Contains(string(r.Body), role) {
				seen[role]++
			}
		}
		if strings.Contains(string(r.Body), roleRepairer) && strings.Contains(string(r.Body), realFeedback) {
			feedback = true
		}
	}
	for _, role := range []string{roleImplementer, roleAcceptance, roleCode, roleRepairer} {
		if seen[role] == 0 {
			t.Errorf("no request named %q (%d requests)", role, len(reqs))
		}
	}
	if !feedback {
		t.Errorf("the repairer's prompt lacks the acceptance reviewer's feedback %q", realFeedback)
	}
}

// TestCLIRealAgentsIssueShipFromCheckout: in a git checkout, run submit
// --template software-change --issue 7 --ship --watch with each real CLI
// against its stand-in: the issue is read through the user's (fake) gh
// and reaches the implementer as the task, the agents play the same
// rounds (one rejection, one repair), the pull request closes the issue
// and is merged through the fake forge, and the run's branch, with both
// edits, is fetched into the checkout.
func TestCLIRealAgentsIssueShipFromCheckout(t *testing.T) {
	for _, tc := range realCLIs() {
		t.Run(tc.harness, func(t *testing.T) {
			h, api := tc.softwareChangeHost(t)
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "acme"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(h.remote.Dir, filepath.Join(dir, "acme", "app.git")); err != nil {
				t.Fatal(err)
			}
			checkout := filepath.Join(dir, "checkout")
			h.remote.Git(dir, "clone", "--quiet", filepath.Join(dir, "acme", "app.git"), checkout)
			answer, _ := json.Marshal(map[string]any{"number": 7, "title": "Add NOTES.md", "body": "It says first, then second.",
				"url": "https://github.com/acme/app/issues/7"})
			gh := fakeForgeCLI(t, "gh", string(answer), "", 0)
			r := oecpPath(t, checkout, gh, false, h.srv, "run", "submit", "--template", "software-change", "--issue", "7", "--ship",
				"--harness", tc.harness, "--id", "ship", "--watch", "--timestamps=false")
			branch := strings.TrimPrefix(h.runBranch(t), "refs/heads/")
			expect(t, r, 0, []string{
				"repair ended (execution ship/repair/1): succeeded",
				"acceptance ended (execution ship/acceptance/2): succeeded",
				"run ship succeeded",
				"pull request: #1 into main (merged)",
				"fetched: branch " + branch + " into " + checkout,
			}, nil)
			if t.Failed() {
				t.Fatalf("logs:\n%s", oecp(t, h.srv, "run", "logs", "ship").stdout)
			}
			calledOnce(t, gh, "gh", "issue", "view", "7", "--json", "number,title,body,url", "--repo", "acme/app")
			if _, body := h.pullRequest(t); !strings.HasSuffix(body, "\n\nCloses #7") {
				t.Fatalf("pull request body:\n%s", body)
			}
			if notes := h.remote.Git(checkout, "show", "refs/heads/"+branch+":NOTES.md"); notes != "first\nsecond" {
				t.Fatalf("the checkout's %s has NOTES.md %q, want both edits", branch, notes)
			}
			reqs := api.requests()
			assertRolesReached(t, reqs)
			if !slices.ContainsFunc(reqs, func(q modelapi.Request) bool {
				return strings.Contains(string(q.Body), roleImplementer) && strings.Contains(string(q.Body), "It says first, then second.")
			}) {
				t.Error("the implementer's prompt lacks the issue's body")
			}
			if n := api.unscripted(); n != 0 {
				t.Errorf("%d model calls found no step of their agent's script", n)
			}
		})
	}
}
