package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
)

// dyingHostEnv names the stage at which the re-executed test binary, acting
// as a server, stops during an agent's sandbox setup to be killed.
const dyingHostEnv = "OECP_SANDBOX_TEST_DYING_HOST"

// TestHostKilledDuringSetupLeavesNoAgent kills a server (this test binary,
// re-executed) at each stage of an agent's sandbox setup: the agent's
// program never runs, and the sandbox is gone.
func TestHostKilledDuringSetupLeavesNoAgent(t *testing.T) {
	if stage := os.Getenv(dyingHostEnv); stage != "" {
		dyingHost(t, stage)
		return
	}
	// The surviving server: it sweeps what the dead one left.
	survivor := requireHost(t, Config{})
	for _, stage := range []string{"limits", "network", "unblock", "gate"} {
		t.Run(stage, func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "workspace")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestHostKilledDuringSetupLeavesNoAgent$", "-test.v")
			cmd.Env = append(os.Environ(), dyingHostEnv+"="+stage, "OECP_SANDBOX_TEST_WORKSPACE="+ws)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			init := pausedAt(t, out)
			outer, _, _, ok := stat(init)
			if !ok {
				t.Fatalf("the sandbox's init %d is gone while its server is paused", init)
			}
			outerFd, initFd := testkit.Pidfd(t, outer), testkit.Pidfd(t, init)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			// The outer bwrap dies with its server; once it is gone, the
			// init has no bwrap parent, and a live server's sweeps (two
			// sightings) end it if it did not end by itself.
			waitExit(t, outerFd, "the sandbox's outer bwrap")
			survivor.SweepOrphans()
			survivor.SweepOrphans()
			waitExit(t, initFd, "the sandbox's init")
			if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
				t.Fatalf("the agent's program ran after its server died at %q", stage)
			}
		})
	}
}

// pausedAt reads the re-executed server's "paused PID" line.
func pausedAt(t *testing.T, out interface{ Read([]byte) (int, error) }) int {
	t.Helper()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if pid, ok := strings.CutPrefix(sc.Text(), "paused "); ok {
			n, err := strconv.Atoi(pid)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("the server ended before reaching the stage")
	return 0
}

// waitExit fails the test when the process of the pidfd fd has not
// exited within testkit.HangGuard.
func waitExit(t *testing.T, fd int, what string) {
	t.Helper()
	if !testkit.Exited(fd, testkit.HangGuard) {
		t.Fatalf("%s outlived its server", what)
	}
}

// dyingHost is the re-executed server: it confines an agent that marks
// the workspace, and stops for good at stage, reporting the sandbox's init.
func dyingHost(t *testing.T, stage string) {
	ws := os.Getenv("OECP_SANDBOX_TEST_WORKSPACE")
	h, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	setupStage = func(s string, pid int) {
		if s == stage {
			fmt.Printf("paused %d\n", pid)
			select {}
		}
	}
	e, err := h.Start(Spec{Run: "r", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `echo ran > "$PWD/ran"; exec sleep 600`)
	cmd.Dir = ws
	start, _, err := e.Confine(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := start(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	t.Fatal("the agent ended while its server was paused")
}

// TestSweepLeavesLiveSandboxesAlone sweeps while an agent runs: its
// sandbox has its bwrap parent and is not touched.
func TestSweepLeavesLiveSandboxesAlone(t *testing.T) {
	h := requireHost(t, Config{})
	ws := t.TempDir()
	defer h.CloseRun("r")
	e, err := h.Start(Spec{Run: "r", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cmd := exec.Command("/bin/sh", "-c", `echo started; read -r _; echo survived`)
	cmd.Dir = ws
	stdin, out, cleanup := startConfined(t, e, cmd)
	r := bufio.NewReader(out)
	if line, _ := r.ReadString('\n'); line != "started\n" {
		t.Fatalf("agent said %q", line)
	}
	if n := h.SweepOrphans(); n != 0 {
		t.Errorf("the sweep killed %d live sandboxes", n)
	}
	stdin.Write([]byte("\n"))
	if line, _ := r.ReadString('\n'); line != "survived\n" {
		t.Errorf("after the sweep the agent said %q", line)
	}
	_ = cmd.Wait()
	cleanup()
}

// TestRunNetworksAreReusedNeverShared: an execution that follows another
// of its run enters the namespace the other used; two that overlap never
// share one; a run's end ends them.
func TestRunNetworksAreReusedNeverShared(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs get network namespaces of their own only on a root server")
	}
	h := requireHost(t, Config{})
	if !h.root {
		t.Skip("runs get network namespaces of their own only on a root server")
	}
	ws := t.TempDir()
	start := func() *Execution {
		e, err := h.Start(Spec{Run: "r", Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	first, second := start(), start()
	if first.net == nil || first.net == second.net {
		t.Fatalf("overlapping executions' networks: %p and %p", first.net, second.net)
	}
	firstNet := first.net
	first.Close()
	third := start()
	if third.net != firstNet {
		t.Errorf("a following execution made a new namespace instead of entering its run's")
	}
	third.Close()
	second.Close()
	pasta := testkit.Pidfd(t, firstNet.net.cmd.Process.Pid)
	h.CloseRun("r")
	if !testkit.Exited(pasta, testkit.HangGuard) {
		t.Errorf("the run's pasta (pid %d) outlived the run", firstNet.net.cmd.Process.Pid)
	}
	testkit.Recv(t, firstNet.net.reaped)

	// Prepare makes a run's first namespace and leases its writer UID
	// while the run's workspace is made: its first execution takes both.
	h.Prepare("p")
	uid, leased := h.Writer("p") // waits for the lease being taken
	h.mu.Lock()
	ready := h.making["p"]
	h.mu.Unlock()
	if ready != nil {
		testkit.Recv(t, ready)
	}
	h.mu.Lock()
	ahead, nets := h.writers["p"], slices.Clone(h.nets["p"])
	h.mu.Unlock()
	if ahead == nil || len(nets) != 1 {
		t.Fatalf("prepared: writer %v, networks %d", ahead, len(nets))
	}
	if !leased || uid != int(ahead.uid) {
		t.Errorf("Writer answered %d %v, not the UID leased ahead (%d)", uid, leased, ahead.uid)
	}
	e, err := h.Start(Spec{Run: "p", Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if e.uid != int(ahead.uid) || e.net != nets[0] {
		t.Errorf("the first execution runs as %d in %p, not as the UID (%d) and in the namespace (%p) made ahead", e.uid, e.net, ahead.uid, nets[0])
	}
	e.Close()
	h.CloseRun("p")
}

// startConfined starts cmd confined by e, with pipes to its standard
// input and from its standard output, and returns them and the cleanup of
// its confinement (see endAtTestEnd).
func startConfined(t *testing.T, e *Execution, cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser, func()) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start, cleanup, err := e.Confine(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := start(); err != nil {
		t.Fatal(err)
	}
	return stdin, out, endAtTestEnd(t, cmd, cleanup)
}

// endAtTestEnd returns cleanup, the cleanup of cmd's confinement, to be
// called once at most, and calls it when the test ends if the test did
// not: cmd, started, is killed first if it still runs, so that a test
// that stops early leaves neither the process nor its sandbox behind.
func endAtTestEnd(t *testing.T, cmd *exec.Cmd, cleanup func()) func() {
	once := sync.OnceFunc(cleanup)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		once()
	})
	return once
}
