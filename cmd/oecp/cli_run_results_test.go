package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oecp/oecp/internal/gittest"
)

// TestCLIRunResultWherePeopleLook: a software-change run with --pr ends
// its watch with the branch it delivered and the pull request (its number:
// the fake forge's repository is a local path, so no address is known);
// run status and a later watch show both, and -o json carries the
// receipt as "delivery"; a watch with --json says it on stderr. The same submission again says,
// before replaying that run, that it answers the run submitted earlier.
func TestCLIRunResultWherePeopleLook(t *testing.T) {
	h := startTemplateHost(t, "codex")
	submit := []string{"run", "submit", "--template", "software-change", "--task", "Add a CHANGE.md", "--pr", "--harness", "codex",
		"--source", h.source, "--id", "tpl-res", "--watch", "--timestamps=false"}
	r := oecp(t, h.srv, submit...)
	branch := strings.TrimPrefix(h.runBranch(t), "refs/heads/")
	head := h.remote.Ref("refs/heads/" + branch)
	delivered := "delivered: branch " + branch + " (head " + head[:12] + ") of acme/app\n"
	pull := "pull request: #1 into main (opened)\n"
	expect(t, r, 0, []string{"run tpl-res succeeded\n", delivered, pull}, nil)
	if !strings.HasSuffix(r.stdout, delivered+pull) {
		t.Errorf("the watch does not end with the delivery:\n%s", r.stdout)
	}
	if strings.Contains(r.stderr, "already submitted") {
		t.Errorf("a first submission says it was submitted before:\n%s", r.stderr)
	}
	expect(t, oecp(t, h.srv, "run", "status", "tpl-res"), 0, []string{"result:   succeeded", delivered, pull}, nil)
	var st struct {
		RunID    string
		Delivery struct{ Repository, Branch, TargetBranch, HeadRevision, PullRequestID, PullRequestURL, Outcome string }
	}
	r = oecp(t, h.srv, "run", "status", "tpl-res", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.RunID != "tpl-res" {
		t.Fatalf("status --json %s: %v", r.stdout, err)
	}
	if d := st.Delivery; d.Repository != "acme/app" || d.Branch != branch || d.TargetBranch != "main" || d.HeadRevision != head ||
		d.PullRequestID != "1" || d.PullRequestURL != "" || d.Outcome != "opened" {
		t.Fatalf("status --json delivery %+v", d)
	}
	expect(t, oecp(t, h.srv, "run", "watch", "tpl-res", "--timestamps=false"), 0, []string{"run tpl-res succeeded\n", delivered + pull}, nil)
	expect(t, oecp(t, h.srv, "run", "watch", "tpl-res", "--json"), 0, nil, []string{"run tpl-res succeeded\n", pull})

	// The same submission again answers the run, and says so first.
	r = oecp(t, h.srv, submit...)
	expect(t, r, 0, []string{"submitted: run tpl-res\n", pull}, []string{"this submission was already submitted, as run tpl-res: it was not started again; what follows is that run's history"})
}

// TestCLIRunSubmitUnservedRepository: a source repository the server does
// not serve is refused with the fix: --source, or the server's --repos;
// not "fix the graph".
func TestCLIRunSubmitUnservedRepository(t *testing.T) {
	h := startTemplateHost(t, "codex")
	r := oecp(t, h.srv, "run", "submit", "--template", "single-worker", "--task", "x", "--harness", "codex",
		"--source", "acme/other@main:"+h.remote.Head())
	expect(t, r, 1, nil, []string{"the server does not serve the repository acme/other", "--source OWNER/NAME@BRANCH:REVISION", "the server's --repos file"})
	if strings.Contains(r.stderr, "fix the submission") {
		t.Errorf("the refusal blames the submission:\n%s", r.stderr)
	}
}

// TestCLIWatchShowsRetriesAndStall: an agent CLI that reports a retry of
// its provider connection and then writes nothing more: the watch shows
// the retry (before the execution's end, whether it arrived live or with
// the end), and the server's --agent-stall-timeout ends the turn with the
// reason as the execution's last line; the run fails.
func TestCLIWatchShowsRetriesAndStall(t *testing.T) {
	h := startAgentHost(t, "codex", "testdata/stall-agent.sh", "--agent-stall-timeout", "1s")
	r := oecp(t, h.srv, "run", "submit", "--template", "single-worker", "--task", "x", "--harness", "codex",
		"--source", h.source, "--id", "stall-1", "--watch", "--timestamps=false")
	retry := "worker retrying: Codex: Reconnecting... 1/5 (stream disconnected before completion) (execution stall-1/worker/1)\n"
	ended := "worker ended (execution stall-1/worker/1): failed (timeout: declared_failure); last line: no output from the agent for 1s: turn ended (--agent-stall-timeout)\n"
	expect(t, r, 1, []string{retry, ended, "run stall-1 failed"}, nil)
	if i, j := strings.Index(r.stdout, retry), strings.Index(r.stdout, ended); i < 0 || j < i || strings.Count(r.stdout, retry) != 1 {
		t.Fatalf("the retry is not shown once, before the execution's end:\n%s", r.stdout)
	}
	expect(t, oecp(t, nil, "serve", "--agent-stall-timeout", "-1s"), 2, nil, []string{"--agent-stall-timeout -1s: want a positive duration, or 0 for no bound"})
}

// TestCLISubmitWatchFetchesTheDeliveredBranch: run submit --watch from a
// git checkout whose origin is the served repository (a local path, as a
// server on the same machine serves it) fetches the delivered oecp/run-…
// branch into the checkout when the watch ends, so that git diff
// main...oecp/run-… shows the change; the user's branch, work tree and
// untracked files are left as they were.
func TestCLISubmitWatchFetchesTheDeliveredBranch(t *testing.T) {
	h := startTemplateHost(t, "codex")
	// origin's path ends in acme/app.git, which the CLI reads as the
	// repository the server serves.
	_, checkout := servedCheckout(t, h.remote)
	if err := os.WriteFile(filepath.Join(checkout, "NOTES.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := oecpIn(t, checkout, h.srv, "run", "submit", "--template", "software-change", "--task", "Add a CHANGE.md", "--pr", "--harness", "codex",
		"--id", "tpl-fetch", "--watch", "--timestamps=false")
	branch := strings.TrimPrefix(h.runBranch(t), "refs/heads/")
	expect(t, r, 0, []string{"run tpl-fetch succeeded\n", "fetched: branch " + branch + " into " + checkout + "; `git diff main..." + branch + "` shows the change\n"},
		[]string{"source acme/app@main:" + h.remote.Head()})
	if got, want := h.remote.Git(checkout, "rev-parse", "refs/heads/"+branch), h.remote.Ref("refs/heads/"+branch); got != want {
		t.Fatalf("the checkout's %s is %s, the delivered one %s", branch, got, want)
	}
	if diff := h.remote.Git(checkout, "diff", "--stat", "main..."+branch); !strings.Contains(diff, "CHANGE.md") {
		t.Fatalf("git diff main...%s: %s", branch, diff)
	}
	if head := h.remote.Git(checkout, "symbolic-ref", "--short", "HEAD"); head != "main" || h.remote.Git(checkout, "rev-parse", "HEAD") != h.remote.Head() {
		t.Fatalf("the checkout's HEAD moved: %s", head)
	}
	if st := h.remote.Git(checkout, "status", "--porcelain"); st != "?? NOTES.txt" {
		t.Fatalf("the work tree changed: %q", st)
	}
}

// servedCheckout is a clone, dir/checkout, of the served repository
// remote by a path ending in acme/app.git (dir/acme/app.git, a link to
// it), which the CLI reads as the repository the server serves.
func servedCheckout(t *testing.T, remote *gittest.Remote) (dir, checkout string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "acme"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(remote.Dir, filepath.Join(dir, "acme", "app.git")); err != nil {
		t.Fatal(err)
	}
	checkout = filepath.Join(dir, "checkout")
	remote.Git(dir, "clone", "--quiet", filepath.Join(dir, "acme", "app.git"), checkout)
	return dir, checkout
}
