package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/delivery"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/internal/agenttest"
	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/workspace"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// rig is a run's prepared workspace over a bare remote, delivered through
// the example fake gh.
type rig struct {
	t      *testing.T
	remote *gittest.Remote
	job    delivery.Job
	lines  []string
	mu     sync.Mutex
}

func newRig(t *testing.T, mode string, ghFlags ...string) *rig {
	t.Helper()
	gh := agenttest.FakeGH(t)
	r := &rig{t: t, remote: gittest.NewRemote(t)}
	repo := workspace.Repo{URL: r.remote.Dir, Forge: &workspace.Forge{Argv: append([]string{gh, "--remote", r.remote.Dir}, ghFlags...)}}
	b, _ := json.Marshal(map[string]workspace.Repo{"acme/app": repo})
	repos, err := workspace.ParseRepos("repos.json", b)
	if err != nil {
		t.Fatal(err)
	}
	m := workspace.NewManager(t.TempDir(), repos, time.Hour, nil)
	t.Cleanup(m.Close)
	src := workspace.Source{Repository: "acme/app", Branch: "main", Revision: r.remote.Head()}
	key, branch := workspace.Key("tenant", "run-1"), workspace.Branch("tenant", "run-1")
	if err := m.Prepare(context.Background(), key, src, branch); err != nil {
		t.Fatal(err)
	}
	paths, _ := m.Paths(key)
	r.job = delivery.Job{RunID: "run-1", Mode: mode, Source: src, Repo: repo, Branch: branch, Paths: paths, Key: key, Records: m}
	return r
}

func (r *rig) edit(file, content string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.job.Paths.Workspace, file), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) deliver(d delivery.Deliverer) string {
	r.t.Helper()
	sinks := worker.Sinks{Log: func(level, msg string) { r.mu.Lock(); r.lines = append(r.lines, level+": "+msg); r.mu.Unlock() }}
	b, err := json.Marshal(d.Run(context.Background(), r.job, sinks))
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

func (r *rig) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// receipt is the outcome a delivery of the rig's run with head should
// have.
func (r *rig) receipt(mode, label, head, message string) string {
	return `{"status":"verifier","output":{"headRevision":"` + head + `","mode":"` + mode + `","outcome":"` + label +
		`","pullRequestId":"1","repository":"acme/app","targetBranch":"main","version":"v1"},"signals":{"delivery":"` + label +
		`"},"diagnostic":{"message":"` + message + `"},"artifacts":[]}`
}

func TestPullRequestOpenedThenRediscovered(t *testing.T) {
	r := newRig(t, delivery.ModePR)
	r.edit("notes.txt", "improved\n")
	got := r.deliver(delivery.Deliverer{})
	head := r.remote.Ref("refs/heads/" + r.job.Branch)
	if head == "" || got != r.receipt("pr", "opened", head, "pull request #1 is open") {
		t.Fatalf("outcome %s (branch at %q)\n%s", got, head, r.text())
	}
	if content, ok := r.remote.Show(head, "notes.txt"); !ok || content != "improved\n" {
		t.Fatalf("delivered commit lacks the edit: %q", content)
	}
	if who := r.remote.Git(r.remote.Dir, "log", "-1", "--format=%an <%ae>", head); who != "oecp <delivery@oecp.invalid>" {
		t.Fatalf("commit identity %q", who)
	}
	if parent := r.remote.Git(r.remote.Dir, "rev-parse", head+"^"); parent != r.job.Source.Revision {
		t.Fatalf("parent %s", parent)
	}
	// Delivered again with nothing new: the same branch head and pull
	// request, found instead of created.
	if again := r.deliver(delivery.Deliverer{}); again != got {
		t.Fatalf("second delivery %s", again)
	}
	calls, _ := os.ReadFile(filepath.Join(r.remote.Dir+".fake-gh", "calls"))
	if n := strings.Count(string(calls), "POST repos/acme/app/pulls "); n != 1 {
		t.Fatalf("%d pull requests created:\n%s", n, calls)
	}
	if !strings.Contains(string(calls), "host=github.com token=\n") {
		t.Fatalf("forge calls:\n%s", calls)
	}
}

func TestMergeModeOutcomes(t *testing.T) {
	cases := []struct {
		name    string
		flags   []string
		label   string
		message string
	}{
		{"merged when no check is required", nil, "merged", "pull request #1 is merged"},
		{"merged after passing checks", []string{"--checks", "success"}, "merged", "pull request #1 is merged"},
		{"ci failed", []string{"--checks", "failure"}, "ci_failed", "CI failed: check test: failure go test ./..."},
		{"conflict", []string{"--mergeable", "false"}, "conflict", "pull request #1 conflicts with main"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, delivery.ModeMerge, tc.flags...)
			r.edit("notes.txt", "improved\n")
			got := r.deliver(delivery.Deliverer{Poll: time.Millisecond})
			if want := r.receipt("merge", tc.label, r.remote.Ref("refs/heads/"+r.job.Branch), tc.message); got != want {
				t.Fatalf("outcome %s\nwant    %s\n%s", got, want, r.text())
			}
		})
	}
}

func TestDeliveryFailures(t *testing.T) {
	t.Setenv("DELIVERY_TEST_TOKEN", "")
	cases := []struct {
		name  string
		setup func(r *rig)
		want  string
		line  string
	}{
		{"no change", func(*rig) {}, `{"status":"error","code":"malformed","reason":"declared_failure"}`, "nothing to deliver"},
		{"checks never finish", func(r *rig) {
			r.job.Mode = delivery.ModeMerge
			r.job.Repo.Forge.Argv = append(r.job.Repo.Forge.Argv, "--checks", "pending")
		}, `{"status":"error","code":"timeout","reason":"declared_failure"}`, "checks of"},
		{"no forge CLI", func(r *rig) { r.job.Repo.Forge.Argv = []string{filepath.Join(r.t.TempDir(), "gh")} },
			`{"status":"error","code":"crash","reason":"declared_failure"}`, "could not start (set forge.argv of acme/app in the server's --repos file)"},
		{"token unset", func(r *rig) { r.job.Repo.TokenEnv = "DELIVERY_TEST_TOKEN" },
			`{"status":"error","code":"refusal","reason":"authentication_required"}`, "DELIVERY_TEST_TOKEN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, delivery.ModePR)
			if tc.name != "no change" {
				r.edit("notes.txt", "improved\n")
			}
			tc.setup(r)
			if got := r.deliver(delivery.Deliverer{Poll: time.Millisecond, MaxPolls: 2}); got != tc.want || !strings.Contains(r.text(), tc.line) {
				t.Fatalf("outcome %s\n%s", got, r.text())
			}
		})
	}
}

// The forge gets the repository's token from the server environment.
func TestTokenReachesForge(t *testing.T) {
	t.Setenv("DELIVERY_TEST_TOKEN", "ghp_example")
	r := newRig(t, delivery.ModePR)
	r.job.Repo.TokenEnv = "DELIVERY_TEST_TOKEN"
	r.edit("notes.txt", "improved\n")
	if got := r.deliver(delivery.Deliverer{}); !strings.Contains(got, `"delivery":"opened"`) {
		t.Fatalf("outcome %s\n%s", got, r.text())
	}
	calls, _ := os.ReadFile(filepath.Join(r.remote.Dir+".fake-gh", "calls"))
	if !strings.Contains(string(calls), "token=set") || strings.Contains(r.text(), "ghp_example") {
		t.Fatalf("calls:\n%s\nlines:\n%s", calls, r.text())
	}
}

func TestCheckNode(t *testing.T) {
	node := func(worker, output, signals, diagnostic string, instructions bool) graph.Node {
		v := &graph.Verifier{Name: "deliver", Worker: worker, Signals: map[string][]string{}}
		var err error
		if v.Output, err = graph.DecodePayloadType([]byte(output)); err != nil {
			t.Fatal(err)
		}
		if v.Diagnostic, err = graph.DecodePayloadType([]byte(diagnostic)); err != nil {
			t.Fatal(err)
		}
		if signals != "" {
			v.Signals["delivery"] = strings.Split(signals, ",")
		}
		if instructions {
			s := "deliver"
			v.Instructions = &s
		}
		return v
	}
	receipt := func(mode, outcomes string) string {
		return `{"kind":"record","fields":{"version":{"type":{"kind":"enum","values":["v1"]},"required":true},"mode":{"type":{"kind":"enum","values":["` + mode +
			`"]},"required":true},"outcome":{"type":{"kind":"enum","values":[` + outcomes + `]},"required":true},"repository":{"type":{"kind":"string"},"required":true},"targetBranch":{"type":{"kind":"string"},"required":true},"headRevision":{"type":{"kind":"string"},"required":true},"pullRequestId":{"type":{"kind":"string"},"required":true}}}`
	}
	diag := `{"kind":"record","fields":{"message":{"type":{"kind":"string"},"required":true}}}`
	merge := receipt("merge", `"merged","conflict","ci_failed"`)
	if err := delivery.CheckNode(node(delivery.WorkerPR, receipt("pr", `"opened"`), "opened", diag, false)); err != nil {
		t.Fatal(err)
	}
	if err := delivery.CheckNode(node(delivery.WorkerMerge, merge, "ci_failed,conflict,merged", diag, false)); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]graph.Node{
		"other worker": node("builtin.echo@1", merge, "ci_failed,conflict,merged", diag, false),
		"instructions": node(delivery.WorkerMerge, merge, "ci_failed,conflict,merged", diag, true),
		"pr labels":    node(delivery.WorkerMerge, merge, "opened", diag, false),
		"pr receipt":   node(delivery.WorkerMerge, receipt("pr", `"opened"`), "ci_failed,conflict,merged", diag, false),
		"diagnostic":   node(delivery.WorkerMerge, merge, "ci_failed,conflict,merged", `{"kind":"null"}`, false),
		"step":         &graph.Step{Name: "deliver", Worker: delivery.WorkerPR},
	} {
		if err := delivery.CheckNode(n); !errors.Is(err, delivery.ErrContract) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// An agent that rewrites the git configuration within its reach (the
// workspace's .git, its home) neither runs a program next to the token nor
// sends the push elsewhere, and the forge CLI reads no configuration the
// agent planted.
func TestAgentGitConfigNeverSeesTheToken(t *testing.T) {
	t.Setenv("DELIVERY_TEST_TOKEN", "ghp_example")
	r := newRig(t, delivery.ModePR)
	r.job.Repo.TokenEnv = "DELIVERY_TEST_TOKEN"
	r.edit("notes.txt", "improved\n")
	ws, dir := r.job.Paths.Workspace, t.TempDir()
	capture, evil := filepath.Join(dir, "capture"), filepath.Join(dir, "evil.git")
	script := filepath.Join(dir, "steal")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nenv >> "+capture+"\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.remote.Git(dir, "init", "--quiet", "--bare", evil)
	if st, err := os.Lstat(filepath.Join(ws, ".git")); err != nil || !st.IsDir() {
		// Not a directory: the agent makes one of its own.
		_ = os.Remove(filepath.Join(ws, ".git"))
		r.remote.Git(dir, "init", "--quiet", ws)
	}
	// An agent outside its sandbox reaches the host's git directory too.
	for _, at := range []string{"--git-dir=" + filepath.Join(ws, ".git"), "--git-dir=" + r.job.Paths.Git} {
		for _, kv := range [][2]string{
			{"core.fsmonitor", script}, {"filter.steal.clean", script}, {"filter.steal.required", "true"},
			{"url." + evil + ".insteadOf", r.remote.Dir}, {"url." + evil + ".pushInsteadOf", r.remote.Dir},
		} {
			r.remote.Git(ws, at, "config", kv[0], kv[1])
		}
	}
	if err := os.MkdirAll(filepath.Join(r.job.Paths.Git, "info"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.job.Paths.Git, "info", "attributes"), []byte("* filter=steal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.edit(".gitattributes", "* filter=steal\n")
	ghConfig := "aliases:\n  api: '!env >> " + capture + "'\n"
	for _, home := range []string{r.job.Paths.Runtime, filepath.Join(r.job.Paths.Runtime, "agent")} {
		if err := os.MkdirAll(filepath.Join(home, ".config", "gh"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".config", "gh", "config.yml"), []byte(ghConfig), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	homes := filepath.Join(dir, "homes")
	r.job.Repo.Forge.Argv = append([]string{"sh", "-c", `echo "$HOME" >> ` + homes + `; test ! -e "$HOME/.config/gh/config.yml" || exit 3; exec "$@"`, "sh"}, r.job.Repo.Forge.Argv...)
	got := r.deliver(delivery.Deliverer{})
	if stolen, _ := os.ReadFile(capture); strings.Contains(string(stolen), "AUTHORIZATION") || strings.Contains(string(stolen), "ghp_example") {
		t.Fatalf("an agent's program saw the token:\n%s", stolen)
	}
	if !strings.Contains(got, `"delivery":"opened"`) || r.remote.Ref("refs/heads/"+r.job.Branch) == "" {
		t.Fatalf("outcome %s\n%s", got, r.text())
	}
	if leaked := r.remote.Git(evil, "for-each-ref"); leaked != "" {
		t.Fatalf("the push went to the agent's URL: %s", leaked)
	}
	seen, _ := os.ReadFile(homes)
	for _, home := range strings.Fields(string(seen)) {
		if strings.HasPrefix(home, r.job.Paths.Dir) {
			t.Fatalf("the forge ran with HOME %s in the run's directory", home)
		}
	}
}

// TestPullRequestTitledAndClosingFromInput: a delivery node's input titles
// the pull request (the first line with text of "title", without heading
// marks) and names the issue it closes, as "Closes REF" in its body; an
// input without them keeps the run's title and closes nothing.
func TestPullRequestTitledAndClosingFromInput(t *testing.T) {
	for _, tc := range []struct {
		input, title, closes string
	}{
		{`{"title":"\n# Fix the login form\n\nIt rejects valid e-mails.","closes":"#7"}`, "Fix the login form", "\n\nCloses #7\n"},
		{`{"title":"Fix it","closes":"acme/other#12"}`, "Fix it", "\n\nCloses acme/other#12\n"},
		{`{"title":"Fix it","closes":""}`, "Fix it", ""},
		{`null`, "oecp: run run-1", ""},
	} {
		r := newRig(t, delivery.ModePR)
		r.job.Input = json.RawMessage(tc.input)
		r.edit("notes.txt", "improved\n")
		if got := r.deliver(delivery.Deliverer{}); !strings.Contains(got, `"outcome":"opened"`) {
			t.Fatalf("%s: outcome %s\n%s", tc.input, got, r.text())
		}
		state := r.remote.Dir + ".fake-gh"
		title, _ := os.ReadFile(filepath.Join(state, "title"))
		body, _ := os.ReadFile(filepath.Join(state, "body"))
		if string(title) != tc.title+"\n" {
			t.Errorf("%s: title %q, want %q", tc.input, title, tc.title)
		}
		if !strings.HasPrefix(string(body), "Delivered by oecp from run run-1: branch "+r.job.Branch) ||
			strings.Contains(string(body), "Closes") != (tc.closes != "") || !strings.HasSuffix(string(body), tc.closes) {
			t.Errorf("%s: body %q, want it to end %q", tc.input, body, tc.closes)
		}
	}
}

// TestDeliveryRefusesABadIssueReference: a "closes" that is no issue
// reference fails the delivery as malformed before anything is committed
// or pushed.
func TestDeliveryRefusesABadIssueReference(t *testing.T) {
	r := newRig(t, delivery.ModePR)
	r.job.Input = json.RawMessage(`{"title":"x","closes":"#7\nCloses #8"}`)
	r.edit("notes.txt", "improved\n")
	if got := r.deliver(delivery.Deliverer{}); !strings.Contains(got, `"code":"malformed"`) {
		t.Fatalf("outcome %s", got)
	}
	if !strings.Contains(r.text(), `is not an issue reference`) {
		t.Fatalf("log:\n%s", r.text())
	}
	if head := r.remote.Ref("refs/heads/" + r.job.Branch); head != "" {
		t.Fatalf("pushed %s", head)
	}
}
