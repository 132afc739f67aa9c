package sandbox

import (
	"bufio"
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
)

// TestNetworkStopDoesNotWaitForTheReap: stopping a sandbox's network
// kills its process and returns without waiting for the process to be
// reaped, which is done on the side. Here a child of the process holds
// its stderr, so the reap cannot finish until that child ends.
func TestNetworkStopDoesNotWaitForTheReap(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 600 & echo $!; exec sleep 600")
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 64}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	holder, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child's pid: %q", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(holder, syscall.SIGKILL) })
	self := testkit.Pidfd(t, cmd.Process.Pid)
	n := &network{cmd: cmd, reaped: make(chan struct{})}

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		n.stop()
	}()
	testkit.Recv(t, stopped)
	if !testkit.Exited(self, testkit.HangGuard) {
		t.Fatal("the network's process outlived stop")
	}
	select {
	case <-n.reaped:
		t.Fatal("reaped while a child still held the process's stderr")
	default:
	}
	if err := syscall.Kill(holder, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, n.reaped)
	n.stop() // a second stop does nothing
}
