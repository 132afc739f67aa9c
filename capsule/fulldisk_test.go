package capsule_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/internal/testkit"
)

// gatedAgent is the command driver's agent of TestFullDiskKeepsTheStepsAttempt:
// the first step says it started on the FIFO $GATE/started and waits for a
// line on the FIFO $GATE/go; every step changes a file and answers at once.
const gatedAgent = `#!/bin/sh
cat >/dev/null
echo "$$" > step.txt
if mkdir "$GATE/once" 2>/dev/null; then
	echo started > "$GATE/started"
	read -r _ < "$GATE/go"
fi
echo '{"session":"s","text":"null"}'
`

// A step that cannot start because the disk of the run's directories is
// full keeps its attempt: the run's log says the disk is full, the run
// waits, and once space is freed the same step (attempts: 1) runs and the
// run succeeds.
func TestFullDiskKeepsTheStepsAttempt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system for the run's directories needs root")
	}
	runDir := filepath.Join(t.TempDir(), "runs")
	if err := os.Mkdir(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", runDir, "tmpfs", 0, "size=8m,nr_inodes=4096"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(runDir, syscall.MNT_DETACH) })

	dir, gate := t.TempDir(), t.TempDir()
	for _, fifo := range []string{"started", "go"} {
		if err := syscall.Mkfifo(filepath.Join(gate, fifo), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GATE", gate)
	agent := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(agent, []byte(gatedAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	remote := benchRemote(t, filepath.Join(dir, "remote.git"), 20)
	h := parseHarness(t, "codex", map[string]any{"driver": "command", "argv": []string{"/bin/sh", agent}, "env": []string{"GATE"}})
	repos := reposAt(t, "acme/app", remote)
	e := start(t, capsule.Options{Harness: h, Repos: repos, RunDir: runDir, KeepWorkspaces: -1, Log: benchLog()})
	graph, plan := stepsGraph(2)
	plan = strings.ReplaceAll(plan, `"model":"gpt-5.6"}`, `"model":"gpt-5.6","env":["GATE"]}`)
	head := gitOut(t, remote, "rev-parse", "HEAD")
	sub := `{"title":"full","graph":` + graph + `,"initialInput":null,"runtime":` + plan +
		`,"source":{"repository":"acme/app","branch":"main","revision":"` + head + `"},"submissionKey":"full"}`
	if _, err := e.b.Runs().Submit(local(), "full", json.RawMessage(sub)); err != nil {
		t.Fatal(err)
	}
	ah := &agentHost{t: t, e: e}

	// While the first step runs, something else fills the disk.
	started := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(filepath.Join(gate, "started")) // until the agent wrote and closed it
		started <- err
	}()
	if err := testkit.Recv(t, started); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(runDir, "filler")
	testkit.FillDisk(t, filler)
	inodes := filepath.Join(runDir, "inodes")
	fillInodes(t, inodes)
	// The executions' homes get a full disk of their own: what the first
	// step's end frees (its home) is not there for the next to take.
	homes := fullHomes(t, runDir)
	if err := os.WriteFile(filepath.Join(gate, "go"), []byte("go\n"), 0); err != nil {
		t.Fatal(err)
	}
	logs, err := e.b.Runs().Logs(local(), "full", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const why = "could not start on this server: no space left on the server's disk; its attempt is not spent"
	seen := readEvents(t, logs, func(ev string) bool { return strings.Contains(ev, why) })
	logs.Stream.Close()
	if len(seen) == 0 || !strings.Contains(seen[len(seen)-1], why) {
		t.Fatalf("the run's log never said why its step waits:\n%s", strings.Join(seen, "\n"))
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(inodes); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Unmount(homes, syscall.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if got := ah.finish("full"); got != `{"status":"succeeded","output":null}` {
		t.Fatalf("terminal %s\n%s", got, ah.logs("full"))
	}
}

// fullHomes mounts a file system with no space and no inode left on the
// directory of the run's execution homes under runDir, and returns it.
func fullHomes(t *testing.T, runDir string) string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(runDir, "*", "full", "runtime"))
	if err != nil || len(found) != 1 {
		t.Fatalf("the run's homes directory: %v (%v)", found, err)
	}
	if err := syscall.Mount("tmpfs", found[0], "tmpfs", 0, "size=64k,nr_inodes=64"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(found[0], syscall.MNT_DETACH) })
	testkit.FillDisk(t, filepath.Join(found[0], "filler"))
	fillInodes(t, filepath.Join(found[0], "inodes"))
	return found[0]
}

// fillInodes makes empty files in dir until its file system has no inode
// left.
func fillInodes(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		f, err := os.Create(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
		f.Close()
	}
}
