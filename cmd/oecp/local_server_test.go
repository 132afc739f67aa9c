package main

import (
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

// localHome is an isolated user for the local server: its own home,
// configuration, state and cache directories, a default address on a
// free loopback port, and a PATH whose codex is the fake agent and whose
// gh is the example fake forge serving remote.
type localHome struct {
	env  []string
	addr string
	data string // the default data directory
}

func newLocalHome(t *testing.T, remote *gittest.Remote) *localHome {
	t.Helper()
	if sandboxtest.ServeFlags(t) != nil {
		t.Skip("the local server confines its agents: needs the agent sandbox")
	}
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	// World-readable, so that the agent runs in the sandbox under any UID.
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	script := testkit.ReadFile(t, "testdata/template-agent.sh")
	gh := agenttest.FakeGH(t)
	files := map[string]string{
		"codex": script,
		"gh":    "#!/bin/sh\nexec " + gh + " --remote " + remote.Dir + " \"$@\"\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := &localHome{addr: testkit.FreeAddr(t), data: filepath.Join(root, "state", "oecp")}
	h.env = []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + filepath.Join(root, "home"),
		"XDG_CONFIG_HOME=" + filepath.Join(root, "config"),
		"XDG_STATE_HOME=" + filepath.Join(root, "state"),
		"XDG_CACHE_HOME=" + filepath.Join(root, "cache"),
		localAddrEnv + "=" + h.addr,
		harnessDefaults["codex"].env + "=dummy-key",
	}
	t.Cleanup(func() { h.stopServer(t) })
	return h
}

// run runs the CLI in dir with the home's environment.
func (h *localHome) run(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return runEnv(t, dir, h.env, args...)
}

// runEnv runs the CLI in dir ("": the test's) with the environment env
// alone.
func runEnv(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(oecpBin, args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

// serverPID is the pid in the data directory's lock file (0: none).
func (h *localHome) serverPID(t *testing.T) int {
	t.Helper()
	return lockPID(filepath.Join(h.data, dataLockFile))
}

// stopServer ends the local server, if one serves the data directory, and
// waits (bounded) until its lock is free.
func (h *localHome) stopServer(t *testing.T) {
	pid := h.serverPID(t)
	if pid == 0 {
		return
	}
	if !testkit.Stop(t, pid, syscall.SIGTERM, 30*time.Second) {
		t.Errorf("the local server (pid %d) did not stop on SIGTERM", pid)
	}
}

// TestCLISubmitStartsALocalServer: in a checkout, with no server at the
// default address and none chosen, run submit --template software-change
// --pr --watch starts one in the background (the fake codex found on
// PATH is its harness; the checkout's origin is served, with the fake gh
// on PATH as its forge): the run delivers a pull request and the branch
// is fetched into the checkout. A second command uses that server (the
// same pid holds the data directory) without starting another.
func TestCLISubmitStartsALocalServer(t *testing.T) {
	remote := gittest.NewRemote(t)
	h := newLocalHome(t, remote)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "acme"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(remote.Dir, filepath.Join(dir, "acme", "app.git")); err != nil {
		t.Fatal(err)
	}
	checkout := filepath.Join(dir, "checkout")
	remote.Git(dir, "clone", "--quiet", filepath.Join(dir, "acme", "app.git"), checkout)

	r := h.run(t, checkout, "run", "submit", "--template", "software-change", "--task", "Add a CHANGE.md", "--pr", "--harness", "codex",
		"--id", "auto-1", "--watch", "--timestamps=false")
	started := "started a local server at ws://" + h.addr + "/oecp"
	expect(t, r, 0, []string{"run auto-1 succeeded\n", "pull request: #1 into main (opened)\n", "fetched: branch oecp/run-"},
		[]string{started, "log: " + filepath.Join(h.data, localLogFile), "harness: codex"})
	refs := remote.Git(remote.Dir, "for-each-ref", "--format=%(refname)", "refs/heads/oecp/")
	if refs == "" || strings.Contains(refs, "\n") {
		t.Fatalf("want one run branch in the remote, have %q", refs)
	}
	if got, want := remote.Git(checkout, "rev-parse", refs), remote.Ref(refs); got != want {
		t.Fatalf("the checkout's %s is %s, the delivered one %s", refs, got, want)
	}
	pid := h.serverPID(t)
	if pid == 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("no local server holds %s (pid %d)", h.data, pid)
	}

	r = h.run(t, checkout, "run", "status", "auto-1")
	expect(t, r, 0, []string{"result:   succeeded"}, nil)
	if strings.Contains(r.stderr, "started a local server") {
		t.Fatalf("a second command started another server:\n%s", r.stderr)
	}
	if again := h.serverPID(t); again != pid {
		t.Fatalf("the data directory is held by pid %d, then %d", pid, again)
	}

	// A checkout of another repository: the server started for the first
	// one does not serve it, and the refusal says how to get one that does.
	if err := os.Symlink(remote.Dir, filepath.Join(dir, "acme", "other.git")); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	remote.Git(dir, "clone", "--quiet", filepath.Join(dir, "acme", "other.git"), other)
	r = h.run(t, other, "run", "submit", "--template", "single-worker", "--task", "x", "--harness", "codex")
	expect(t, r, 1, nil, []string{"the server does not serve the repository acme/other",
		"A local server serves the repositories and agent CLIs it found when it started", "kill " + strconv.Itoa(pid)})

	// Stopped, the next command starts one that serves both repositories,
	// over the same ledger.
	h.stopServer(t)
	r = h.run(t, other, "run", "submit", "--template", "single-worker", "--task", "x", "--harness", "codex", "--id", "auto-2",
		"--watch", "--timestamps=false")
	expect(t, r, 0, []string{"run auto-2 succeeded\n"}, []string{started})
	expect(t, h.run(t, checkout, "run", "status", "auto-1"), 0, []string{"result:   succeeded"}, nil)
	repos, err := os.ReadFile(filepath.Join(h.data, localDir, "repos.json"))
	if err != nil || !strings.Contains(string(repos), `"acme/app"`) || !strings.Contains(string(repos), `"acme/other"`) {
		t.Fatalf("the local server's repos.json: %s %v", repos, err)
	}
}

// TestCLILocalServerRace: two commands that find no server at once start
// one server between them: the data directory's lock lets one serve, and
// the other command uses it. Exactly one says it started it.
func TestCLILocalServerRace(t *testing.T) {
	h := newLocalHome(t, gittest.NewRemote(t))
	dir := t.TempDir()
	results := make(chan result, 2)
	for range 2 {
		go func() {
			cmd := exec.Command(oecpBin, "run", "list")
			cmd.Dir, cmd.Env = dir, h.env
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			code := 0
			if err := cmd.Run(); err != nil {
				code = -1
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				}
			}
			results <- result{code, out.String(), errb.String()}
		}()
	}
	starts := 0
	for range 2 {
		r := testkit.Recv(t, results)
		expect(t, r, 0, []string{"no runs"}, nil)
		starts += strings.Count(r.stderr, "started a local server")
	}
	log, err := os.ReadFile(filepath.Join(h.data, localLogFile))
	if err != nil {
		t.Fatal(err)
	}
	if starts != 1 || strings.Count(string(log), "msg=serving") != 1 {
		t.Fatalf("%d commands say they started the server; its log:\n%s", starts, log)
	}
}

// TestCLINoLocalServerWhenChosen: no local server is started with
// --no-auto-server, with OECP_NO_AUTO_SERVER, or when the server was
// chosen (OECP_SERVER, even at the default address's URL, or a target):
// nothing answering is the usual error naming the URL.
func TestCLINoLocalServerWhenChosen(t *testing.T) {
	h := newLocalHome(t, gittest.NewRemote(t))
	url := "ws://" + h.addr + "/oecp"
	base := h.env
	for _, tc := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"run", "list", "--no-auto-server"}},
		{[]string{noAutoServerEnv + "=1"}, []string{"run", "list"}},
		{[]string{"OECP_SERVER=" + url}, []string{"run", "list"}},
		{nil, []string{"run", "list", "--server", url}},
	} {
		h.env = append(append([]string{}, base...), tc.env...)
		expect(t, h.run(t, "", tc.args...), 2, nil, []string{"cannot talk to the server at " + url})
	}
	h.env = base
	expect(t, h.run(t, "", "target", "add", "here", "--url", url, "--use"), 0, nil, nil)
	expect(t, h.run(t, "", "run", "list"), 2, nil, []string{"cannot talk to the server at " + url, "the current target, here"})
	if pid := h.serverPID(t); pid != 0 {
		t.Fatalf("a local server was started (pid %d)", pid)
	}
}
