package worker_test

import (
	"context"
	"os/exec"
	"syscall"
	"testing"

	"github.com/oecp/oecp/engine/worker"
)

// startGroup starts a shell leading its own process group, with a
// background child, both sleeping.
func startGroup(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 3600 & exec sleep 3600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd
}

// TestKillLeftKillsTheWholeGroup: what is left of a recorded group, its
// leader and its children, is killed.
func TestKillLeftKillsTheWholeGroup(t *testing.T) {
	cmd := startGroup(t)
	g, err := worker.ProbeGroup(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if g.PGID != cmd.Process.Pid || g.Start == 0 || g.Boot == "" {
		t.Fatalf("probe %+v", g)
	}
	n, err := g.KillLeft(context.Background())
	if err != nil || n == 0 {
		t.Fatalf("KillLeft = %d, %v", n, err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the leader exited normally, want killed")
	}
	if n, err := g.KillLeft(context.Background()); n != 0 || err != nil {
		t.Fatalf("second KillLeft = %d, %v; want nothing left", n, err)
	}
}

// TestKillLeftSparesOthers: a group recorded under another boot id (another
// host) or whose leader pid now names a process started at another time
// (a reused pid) is left alone.
func TestKillLeftSparesOthers(t *testing.T) {
	cmd := startGroup(t)
	g, err := worker.ProbeGroup(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	otherHost, reused := g, g
	otherHost.Boot = "00000000-0000-0000-0000-000000000000"
	reused.Start--
	for _, x := range []worker.Group{otherHost, reused} {
		if n, err := x.KillLeft(context.Background()); n != 0 || err != nil {
			t.Fatalf("KillLeft(%+v) = %d, %v; want nothing killed", x, n, err)
		}
	}
	if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
		t.Fatalf("the group was killed: %v", err)
	}
}
