package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oecp/oecp/engine/harness/sandbox/sandboxtest"
	"github.com/oecp/oecp/internal/agenttest"
	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/internal/testkit"
)

// quickstartMarker marks the README's fenced block of commands that
// TestReadmeQuickstartReplays runs.
const quickstartMarker = "<!-- replayed by TestReadmeQuickstartReplays -->"

// readmeBlock is the fenced block that follows marker in README.md.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), marker+"\n")
	if !ok {
		t.Fatalf("README.md has no %s", marker)
	}
	fence, rest, ok := strings.Cut(after, "\n")
	if !ok || !strings.HasPrefix(fence, "```") {
		t.Fatalf("no fenced block after %s", marker)
	}
	block, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatalf("the block after %s is not closed", marker)
	}
	return block
}

// replayTools writes the stand-ins the quickstart's commands run, in bin
// (the first directory of PATH): go installs oecp (a wrapper of the test's
// binary) into ~/go/bin, npm installs the fake agent as codex or claude
// into bin, and gh answers `auth token`, reads issue 7 and serves
// delivery's `gh api` calls from the local remote. The oecp wrapper runs
// `serve` on a free loopback port (its log in state/serve.log, its pid in
// state/serve.pid) and points every other command at it.
func replayTools(t *testing.T, bin, home, state, remote string) {
	t.Helper()
	ex := agenttest.FakeGH(t)
	agent, err := filepath.Abs("testdata/template-agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	issue, _ := json.Marshal(map[string]any{"number": 7, "title": issueTitle, "body": issueBody, "url": "https://github.com/acme/app/issues/7"})
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	serveFlags := strings.Join(sandboxtest.ServeFlags(t), " ")
	tools := map[string]string{
		"go": `case "$*" in
"install github.com/oecp/oecp/cmd/oecp@latest") mkdir -p "$HOME/go/bin" && cp ` + q(filepath.Join(state, "oecp")) + ` "$HOME/go/bin/oecp" ;;
*) echo "replay go: unexpected go $*" >&2; exit 2 ;;
esac`,
		"npm": `case "$*" in
"install -g @openai/codex") cp ` + q(agent) + ` ` + q(filepath.Join(bin, "codex")) + ` ;;
"install -g @anthropic-ai/claude-code") cp ` + q(agent) + ` ` + q(filepath.Join(bin, "claude")) + ` ;;
*) echo "replay npm: unexpected npm $*" >&2; exit 2 ;;
esac`,
		"gh": `case "$1 $2" in
"auth token") echo gho_replay ;;
"issue view") echo "$*" >> ` + q(filepath.Join(state, "gh-issue")) + `; printf '%s\n' ` + q(string(issue)) + ` ;;
"api "*) exec ` + q(ex) + ` --remote ` + q(remote) + ` "$@" ;;
*) echo "replay gh: unexpected gh $*" >&2; exit 2 ;;
esac`,
	}
	for name, body := range tools {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	wrapper := `#!/bin/sh
log=` + q(filepath.Join(state, "serve.log")) + `
if [ "$1" = serve ]; then
	echo $$ > ` + q(filepath.Join(state, "serve.pid")) + `
	exec ` + q(oecpBin) + ` "$@" --listen 127.0.0.1:0 ` + serveFlags + ` 2> "$log"
fi
i=0
until url=$(sed -n 's/.* url=\(ws:[^ ]*\).*/\1/p' "$log" 2>/dev/null | head -n 1) && [ -n "$url" ]; do
	i=$((i + 1))
	if [ $i -gt 600 ]; then echo "replay oecp: the server announced no URL" >&2; exit 97; fi
	sleep 0.1
done
OECP_SERVER=$url exec ` + q(oecpBin) + ` "$@"
`
	if err := os.WriteFile(filepath.Join(state, "oecp"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
}

// stopProcess interrupts pid and waits, boundedly, until it is gone (or a
// zombie), then kills it.
func stopProcess(t *testing.T, pid int) {
	if !testkit.Stop(t, pid, syscall.SIGINT, 30*time.Second) {
		t.Errorf("the quickstart's server (pid %d) did not stop on SIGINT; killed", pid)
	}
}

// TestReadmeQuickstartReplays runs the README's quickstart of coding
// agents (the block marked quickstartMarker) as written, line by line in
// one bash, with stand-ins on PATH (go, npm, gh; the fake agent as
// codex), HOME a fresh directory holding the checkout ~/src/app of a
// local remote acme/app, and that remote's path in place of GitHub's
// URL: the run reads issue 7, succeeds, opens a pull request that closes
// the issue, and its branch is fetched into the checkout.
func TestReadmeQuickstartReplays(t *testing.T) {
	block := readmeBlock(t, quickstartMarker)
	const githubURL = "https://github.com/acme/app.git"
	if !strings.Contains(block, githubURL) {
		t.Fatalf("the quickstart no longer names %s, the URL this test replaces:\n%s", githubURL, block)
	}
	root := t.TempDir()
	home, bin, state := filepath.Join(root, "home"), filepath.Join(root, "bin"), filepath.Join(root, "state")
	for _, d := range []string{home, bin, state, filepath.Join(root, "acme")} {
		// World-readable, so that the agent runs in the sandbox under any UID.
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	remote := gittest.NewRemote(t)
	origin := filepath.Join(root, "acme", "app.git") // read as acme/app
	if err := os.Symlink(remote.Dir, origin); err != nil {
		t.Fatal(err)
	}
	remote.Git(root, "clone", "--quiet", origin, filepath.Join(home, "src", "app"))
	replayTools(t, bin, home, state, remote.Dir)

	script := filepath.Join(state, "quickstart.sh")
	if err := os.WriteFile(script, []byte("set -e\n"+strings.ReplaceAll(block, githubURL, remote.Dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-x", script)
	cmd.Dir = home
	cmd.Env = []string{"HOME=" + home, "PATH=" + bin + ":" + filepath.Join(home, "go", "bin") + ":" + os.Getenv("PATH"), "LANG=C.UTF-8"}
	// Files, not pipes: the server the block starts in the background
	// outlives the shell.
	stdout, err := os.Create(filepath.Join(state, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(state, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(state, "serve.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				stopProcess(t, pid)
			}
		}
	})
	runErr := cmd.Run()
	out, _ := os.ReadFile(filepath.Join(state, "stdout"))
	errOut, _ := os.ReadFile(filepath.Join(state, "stderr"))
	var ee *exec.ExitError
	if runErr != nil && !errors.As(runErr, &ee) {
		t.Fatal(runErr)
	}
	if runErr != nil {
		serveLog, _ := os.ReadFile(filepath.Join(state, "serve.log"))
		t.Fatalf("the quickstart failed: %v\nstdout:\n%s\nstderr:\n%s\nserver:\n%s", runErr, out, errOut, serveLog)
	}
	t.Logf("the quickstart's output:\n%s", out)
	checkout := filepath.Join(home, "src", "app")
	h := &templateHost{remote: remote}
	branch := strings.TrimPrefix(h.runBranch(t), "refs/heads/")
	for _, want := range []string{"succeeded\n", "pull request: #1 into main (opened)", "fetched: branch " + branch + " into " + checkout} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the quickstart's output lacks %q:\n%s\nstderr:\n%s", want, out, errOut)
		}
	}
	if asked, _ := os.ReadFile(filepath.Join(state, "gh-issue")); string(asked) != "issue view 7 --json number,title,body,url --repo acme/app\n" {
		t.Errorf("gh was asked for the issue as %q", asked)
	}
	if title, body := h.pullRequest(t); title != issueTitle || !strings.HasSuffix(body, "\n\nCloses #7") {
		t.Errorf("pull request %q:\n%s", title, body)
	}
	if got, want := remote.Git(checkout, "rev-parse", "refs/heads/"+branch), remote.Ref("refs/heads/"+branch); got != want {
		t.Errorf("the checkout's %s is %s, the delivered one %s", branch, got, want)
	}
}
