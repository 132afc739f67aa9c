package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fakeForgeCLI installs a stand-in for the user's gh or glab (name) in a
// directory of its own: it appends its arguments, one per line and then
// "--", to the file calls beside it, prints stderr to stderr and answer
// to stdout, and exits with exit. It returns the directory, for PATH.
func fakeForgeCLI(t *testing.T, name, answer, stderr string, exit int) string {
	t.Helper()
	dir := t.TempDir()
	// Shell builtins only: the CLI may run it with nothing else on PATH.
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> " + quote(filepath.Join(dir, "calls")) + "; done\n" +
		"echo -- >> " + quote(filepath.Join(dir, "calls")) + "\n" +
		"printf '%s' " + quote(stderr) + " >&2\nprintf '%s' " + quote(answer) + "\nexit " + strconv.Itoa(exit) + "\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ghIssue is a fake gh whose issue view answers issue number, titled
// issueTitle with issueBody, at url.
func ghIssue(t *testing.T, number int, url string) string {
	t.Helper()
	answer, _ := json.Marshal(map[string]any{"number": number, "title": issueTitle, "body": issueBody, "url": url})
	return fakeForgeCLI(t, "gh", string(answer), "", 0)
}

// calledOnce fails the test unless the fake forge CLI name in dir was
// called once, with the arguments want.
func calledOnce(t *testing.T, dir, name string, want ...string) {
	t.Helper()
	if calls := forgeCalls(t, dir); len(calls) != 1 || !slices.Equal(calls[0], want) {
		t.Fatalf("%s calls %q, want one %q", name, calls, want)
	}
}

// forgeCalls are the argument lists the fake forge CLI in dir was called
// with.
func forgeCalls(t *testing.T, dir string) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "calls"))
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	var calls [][]string
	for call := range strings.SplitSeq(strings.TrimSuffix(string(b), "--\n"), "--\n") {
		calls = append(calls, strings.Split(strings.TrimSuffix(call, "\n"), "\n"))
	}
	return calls
}

// oecpPath is oecpIn with pathDir first on the CLI's PATH (alone on it when
// only is set).
func oecpPath(t *testing.T, dir, pathDir string, only bool, srv *testServer, args ...string) result {
	t.Helper()
	cmd := exec.Command(oecpBin, args...)
	cmd.Dir = dir
	path := pathDir + string(os.PathListSeparator) + os.Getenv("PATH")
	if only {
		path = pathDir
	}
	cmd.Env = append(cliEnv(srv), "PATH="+path)
	return runResult(t, cmd)
}

// The issue of the end-to-end tests: its body has quotes, a shell
// substitution and Markdown, which must reach the agents as written.
const (
	issueTitle = "Add a CHANGE.md"
	issueBody  = "Say \"why\" in it; keep `$(rm -rf /)` as text.\r\n\r\n- one\n"
)

// pullRequest is the title and body of the pull request the example fake
// forge of h's remote was asked to create.
func (h *templateHost) pullRequest(t *testing.T) (title, body string) {
	t.Helper()
	state := h.remote.Dir + ".fake-gh"
	ti, err1 := os.ReadFile(filepath.Join(state, "title"))
	b, err2 := os.ReadFile(filepath.Join(state, "body"))
	if err1 != nil || err2 != nil {
		t.Fatalf("no pull request was created: %v %v", err1, err2)
	}
	return strings.TrimSuffix(string(ti), "\n"), strings.TrimSuffix(string(b), "\n")
}

// implementerPrompt is the implementer's prompt, which the fake agent
// keeps in the delivered branch.
func (h *templateHost) implementerPrompt(t *testing.T) string {
	t.Helper()
	prompt, ok := h.remote.Show(h.remote.Ref(h.runBranch(t)), "PROMPT.txt")
	if !ok {
		t.Fatal("the delivered branch has no PROMPT.txt")
	}
	return prompt
}

// TestCLISubmitIssueOpensClosingPullRequest: run submit --issue 7 reads
// the issue with the user's gh (gh issue view 7 --repo OWNER/NAME of the
// source), its title and body become the task the agents get, the run's
// title is the issue's, and the pull request delivery opens is titled by
// it and closes the issue (Closes #7).
func TestCLISubmitIssueOpensClosingPullRequest(t *testing.T) {
	h := startTemplateHost(t, "codex")
	gh := ghIssue(t, 7, "https://github.com/acme/app/issues/7")
	r := oecpPath(t, "", gh, false, h.srv, "run", "submit", "--template", "software-change", "--issue", "7", "--pr", "--harness", "codex",
		"--source", h.source, "--id", "issue-pr", "--watch", "--timestamps=false")
	expect(t, r, 0, []string{`"` + issueTitle + `", source ` + h.source, "run issue-pr succeeded"},
		[]string{`task from issue https://github.com/acme/app/issues/7: "` + issueTitle + `"`})
	calledOnce(t, gh, "gh", "issue", "view", "7", "--json", "number,title,body,url", "--repo", "acme/app")
	task, _ := json.Marshal("# " + issueTitle + "\n\n" + strings.TrimSpace(issueBody) + "\n")
	if prompt := h.implementerPrompt(t); !strings.Contains(prompt, `"task":`+string(task)) {
		t.Fatalf("the implementer's prompt lacks the issue %s:\n%s", task, prompt)
	}
	title, body := h.pullRequest(t)
	if title != issueTitle || !strings.HasSuffix(body, "\n\nCloses #7") {
		t.Fatalf("pull request %q:\n%s", title, body)
	}
}

// TestCLISubmitIssueShipMergesClosingAnotherRepository: --ship with an
// issue of another repository (OWNER/NAME#N) merges the pull request
// through the fake forge, and its body closes the issue by its full
// reference (Closes acme/other#12).
func TestCLISubmitIssueShipMergesClosingAnotherRepository(t *testing.T) {
	h := startTemplateHost(t, "codex")
	gh := ghIssue(t, 12, "https://github.com/acme/other/issues/12")
	r := oecpPath(t, "", gh, false, h.srv, "run", "submit", "--template", "software-change", "--issue", "acme/other#12", "--ship", "--harness", "codex",
		"--source", h.source, "--id", "issue-ship", "--watch", "--timestamps=false")
	expect(t, r, 0, []string{"run issue-ship succeeded", "pull request: #1 into main (merged)"}, nil)
	calledOnce(t, gh, "gh", "issue", "view", "12", "--json", "number,title,body,url", "--repo", "acme/other")
	if _, body := h.pullRequest(t); !strings.HasSuffix(body, "\n\nCloses acme/other#12") {
		t.Fatalf("pull request body:\n%s", body)
	}
}

// TestCLISubmitGitLabIssueFromCheckout: in a git checkout, --forge gitlab
// --issue 5 reads issue 5 of the checkout's repository with glab (its JSON
// has iid, description and web_url), the pull request closes it, and the
// run's branch is fetched into the checkout afterwards.
func TestCLISubmitGitLabIssueFromCheckout(t *testing.T) {
	h := startTemplateHost(t, "codex")
	_, checkout := servedCheckout(t, h.remote)
	answer, _ := json.Marshal(map[string]any{"iid": 5, "id": 912, "title": issueTitle, "description": issueBody,
		"web_url": "https://gitlab.example/acme/app/-/issues/5"})
	glab := fakeForgeCLI(t, "glab", "Notice: a newer glab is available\n"+string(answer), "", 0)
	r := oecpPath(t, checkout, glab, false, h.srv, "run", "submit", "--template", "software-change", "--issue", "5", "--forge", "gitlab",
		"--pr", "--harness", "codex", "--id", "issue-gl", "--watch", "--timestamps=false")
	branch := strings.TrimPrefix(h.runBranch(t), "refs/heads/")
	expect(t, r, 0, []string{"run issue-gl succeeded\n", "fetched: branch " + branch + " into " + checkout}, []string{"source acme/app@main:"})
	calledOnce(t, glab, "glab", "issue", "view", "5", "--output", "json", "--repo", "acme/app")
	if prompt := h.implementerPrompt(t); !strings.Contains(prompt, `keep `+"`$(rm -rf /)`"+` as text.`) {
		t.Fatalf("the implementer's prompt lacks the issue's description:\n%s", prompt)
	}
	if _, body := h.pullRequest(t); !strings.HasSuffix(body, "\n\nCloses #5") {
		t.Fatalf("pull request body:\n%s", body)
	}
	if got, want := h.remote.Git(checkout, "rev-parse", "refs/heads/"+branch), h.remote.Ref("refs/heads/"+branch); got != want {
		t.Fatalf("the checkout's %s is %s, the delivered one %s", branch, got, want)
	}
}

// TestCLISubmitUnreadableIssueSubmitsNothing: an issue the forge CLI
// cannot read (not found, not logged in, no CLI, an answer that is no
// issue) is a clear error naming the issue and what to do, exit 2, and
// no run is submitted.
func TestCLISubmitUnreadableIssueSubmitsNothing(t *testing.T) {
	srv := startServer(t)
	for _, tc := range []struct {
		name, answer, stderr string
		exit                 int
		noCLI                bool
		want                 []string
	}{
		{name: "not found", stderr: "GraphQL: Could not resolve to an issue or pull request with the number of 7. (repository.issue)\n", exit: 1,
			want: []string{"oecp run submit: cannot read issue #7: `gh issue view 7 --json number,title,body,url --repo acme/widgets` failed: GraphQL: Could not resolve to an issue",
				"Check that issue #7 exists and that you can see it"}},
		{name: "not logged in", stderr: "To get started with GitHub CLI, please run:  gh auth login\nAlternatively, populate the GH_TOKEN environment variable.\n", exit: 4,
			want: []string{"cannot read issue #7:", "please run: gh auth login", "Log in with `gh auth login`"}},
		{name: "no gh", noCLI: true,
			want: []string{"cannot read issue #7: gh, the GitHub CLI, is not installed (not on PATH)", "Install it (https://cli.github.com) and log in with `gh auth login`, or give the task with --task"}},
		{name: "no issue JSON", answer: "Add a CHANGE.md\n",
			want: []string{"cannot read issue #7: `gh issue view 7 --json number,title,body,url --repo acme/widgets` answered no issue JSON"}},
		{name: "no title", answer: `{"number":7,"title":"","body":"x"}`,
			want: []string{"cannot read issue #7: `gh issue view 7 --json number,title,body,url --repo acme/widgets` answered an issue without a title"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh := fakeForgeCLI(t, "gh", tc.answer, tc.stderr, tc.exit)
			if tc.noCLI {
				gh = t.TempDir()
			}
			r := oecpPath(t, "", gh, true, srv, "run", "submit", "--template", "software-change", "--issue", "7", "--pr", "--harness", "codex",
				"--source", testSource)
			expect(t, r, 2, nil, tc.want)
			if r.stdout != "" {
				t.Errorf("stdout: %s", r.stdout)
			}
		})
	}
	if r := oecp(t, srv, "run", "list", "-o", "json"); r.code != 0 || strings.Contains(r.stdout, "runId") {
		t.Fatalf("a run was submitted: %s %s", r.stdout, r.stderr)
	}
}

// TestCLIIssueFlagRefusals: --issue with --task or --input, --forge
// without --issue or with a forge it does not know or against the issue's
// URL, and a REF in none of the three spellings are usage errors (exit 2)
// before any forge CLI runs.
func TestCLIIssueFlagRefusals(t *testing.T) {
	gh := fakeForgeCLI(t, "gh", "{}", "", 0)
	base := []string{"run", "submit", "--template", "software-change", "--pr", "--harness", "codex", "--source", testSource}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--issue", "7", "--task", "x"}, "--task and --issue exclude each other"},
		{[]string{"--issue", "7", "--input", "{}"}, "--issue and --input exclude each other"},
		{[]string{"--task", "x", "--forge", "github"}, "--forge goes with --issue"},
		{[]string{"--issue", "7", "--forge", "bitbucket"}, `--forge "bitbucket": want github or gitlab`},
		{[]string{"--issue", "https://gitlab.com/g/p/-/issues/3", "--forge", "github"}, "--forge github contradicts the issue's URL https://gitlab.com/g/p/-/issues/3, a gitlab issue"},
		{[]string{"--issue", "seven"}, `--issue "seven": want a number (123), OWNER/NAME#123, or the issue's URL`},
		{[]string{"--issue", "https://github.com/acme/app/pull/7"}, `--issue "https://github.com/acme/app/pull/7": want`},
		{nil, "give the task of --template software-change with --task TEXT, --task @FILE or --issue REF"},
	} {
		r := oecpPath(t, "", gh, false, nil, append(slices.Clone(base), tc.args...)...)
		expect(t, r, 2, nil, []string{tc.want})
	}
	if calls := forgeCalls(t, gh); calls != nil {
		t.Fatalf("gh ran: %q", calls)
	}
}

// TestParseIssueRef: the three spellings of --issue (a number, a
// repository's number, the issue's URL on GitHub, GitHub Enterprise or
// GitLab), and what is none of them.
func TestParseIssueRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want issueRef
	}{
		{"123", issueRef{number: "123"}},
		{"#123", issueRef{number: "123"}},
		{"acme/app#7", issueRef{repo: "acme/app", number: "7"}},
		{"group/sub/project#9", issueRef{repo: "group/sub/project", number: "9"}},
		{"https://github.com/acme/app/issues/7", issueRef{repo: "acme/app", number: "7", url: "https://github.com/acme/app/issues/7", forge: forgeGitHub}},
		{"https://github.com/acme/app/issues/7#issuecomment-1", issueRef{repo: "acme/app", number: "7", url: "https://github.com/acme/app/issues/7", forge: forgeGitHub}},
		{"https://ghe.corp/acme/app/issues/70/", issueRef{repo: "acme/app", number: "70", url: "https://ghe.corp/acme/app/issues/70/", forge: forgeGitHub}},
		{"https://gitlab.example/g/p/-/issues/123", issueRef{repo: "g/p", number: "123", url: "https://gitlab.example/g/p/-/issues/123", forge: forgeGitLab}},
		{"https://git.corp/g/sub/p/-/issues/4", issueRef{repo: "g/sub/p", number: "4", url: "https://git.corp/g/sub/p/-/issues/4", forge: forgeGitLab}},
		{"https://gitlab.com/g/p/issues/5", issueRef{repo: "g/p", number: "5", url: "https://gitlab.com/g/p/issues/5", forge: forgeGitLab}},
	} {
		got, err := parseIssueRef(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseIssueRef(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "0", "07", "seven", "acme#7", "acme/app#", "acme/app#x", "/acme/app#7", "https://github.com/acme/app/pull/7",
		"https://github.com/acme/issues/7", "ftp://github.com/acme/app/issues/7", "https://me@github.com/acme/app/issues/7",
		"https://github.com/acme/app/issues/7?x=1", "github.com/acme/app/issues/7"} {
		if got, err := parseIssueRef(in); err == nil {
			t.Errorf("parseIssueRef(%q) = %+v, want an error", in, got)
		}
	}
}

// TestIssueCommandAndCloses: the forge CLI's command for each spelling
// (the origin's host for a forge other than github.com or gitlab.com, the
// origin's whole GitLab group path), the forge chosen, and the reference
// the pull request closes the issue by: #N in the delivered repository,
// PATH#N in another.
func TestIssueCommandAndCloses(t *testing.T) {
	ref := func(s string) issueRef {
		r, err := parseIssueRef(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		ref, forgeFlag string
		origin         remote
		forge, argv    string
	}{
		{"7", "", remote{}, "github", "gh issue view 7 --json number,title,body,url --repo acme/app"},
		{"7", "", parseRemote("git@ghe.corp:acme/app.git"), "github", "gh issue view 7 --json number,title,body,url --repo ghe.corp/acme/app"},
		{"7", "", parseRemote("https://github.com/acme/app.git"), "github", "gh issue view 7 --json number,title,body,url --repo acme/app"},
		{"other/lib#7", "", remote{}, "github", "gh issue view 7 --json number,title,body,url --repo other/lib"},
		{"https://github.com/acme/app/issues/7", "", parseRemote("https://gitlab.com/g/acme/app.git"), "github", "gh issue view https://github.com/acme/app/issues/7 --json number,title,body,url"},
		{"7", "", parseRemote("https://gitlab.com/g/acme/app.git"), "gitlab", "glab issue view 7 --output json --repo g/acme/app"},
		{"7", "gitlab", parseRemote("ssh://git@git.corp:2222/g/acme/app.git"), "gitlab", "glab issue view 7 --output json --repo https://git.corp/g/acme/app"},
		{"https://gitlab.example/g/p/-/issues/3", "", remote{}, "gitlab", "glab issue view https://gitlab.example/g/p/-/issues/3 --output json"},
	} {
		r := ref(tc.ref)
		forge, err := issueForge(r, tc.forgeFlag, tc.origin)
		if err != nil || forge != tc.forge {
			t.Errorf("%s from %+v: forge %s %v, want %s", tc.ref, tc.origin, forge, err, tc.forge)
			continue
		}
		if argv := strings.Join(issueCommand(forge, r, "acme/app", tc.origin), " "); argv != tc.argv {
			t.Errorf("%s from %+v: %s\nwant %s", tc.ref, tc.origin, argv, tc.argv)
		}
	}
	for _, tc := range []struct {
		ref, url, want string
	}{
		{"7", "https://github.com/acme/app/issues/7", "#7"},
		{"7", "", "#7"},
		{"ACME/App#7", "", "#7"},
		{"other/lib#7", "https://github.com/other/lib/issues/7", "other/lib#7"},
		{"https://gitlab.com/g/acme/app/-/issues/7", "https://gitlab.com/g/acme/app/-/issues/7", "#7"},
		{"https://gitlab.com/g/lib/-/issues/7", "https://gitlab.com/g/lib/-/issues/7", "g/lib#7"},
	} {
		if got := (issue{number: 7, url: tc.url}).closes(ref(tc.ref), "acme/app"); got != tc.want {
			t.Errorf("closes of %s (%s) = %q, want %q", tc.ref, tc.url, got, tc.want)
		}
	}
}

// TestCLIIssueGraphWithoutClosesRefused: a graph of one's own that
// delivers but has no input field "closes" to carry the issue to its
// delivery is refused with --issue (exit 2, nothing submitted): its pull
// request would not close the issue.
func TestCLIIssueGraphWithoutClosesRefused(t *testing.T) {
	answer, _ := json.Marshal(map[string]any{"number": 7, "title": issueTitle, "body": issueBody})
	gh := fakeForgeCLI(t, "gh", string(answer), "", 0)
	r := oecpPath(t, "", gh, false, nil, "run", "submit", "-f", "../../examples/agents/review-loop.json",
		"--runtime", "../../examples/agents/runtime-codex.json", "--issue", "7", "--source", testSource)
	expect(t, r, 2, nil, []string{`--issue: the graph's input has no string field closes, so its pull request could not close the issue`,
		`Add a required string field "closes" to its initialInput`})
}
