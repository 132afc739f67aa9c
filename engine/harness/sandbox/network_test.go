package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// loopbackHelperEnv, set to 1, makes the test binary loopbackHelper.
const loopbackHelperEnv = "OECP_SANDBOX_LOOPBACK_HELPER"

// loopbackHelper runs in a network namespace of its own: at the first
// line on stdin it brings the namespace's loopback up and says "up", then
// waits for stdin's end.
func loopbackHelper() {
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		os.Exit(1)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		os.Exit(2)
	}
	ifr, err := unix.NewIfreq("lo")
	if err == nil {
		err = unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr)
	}
	if err == nil {
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
		err = unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
	}
	if err != nil {
		os.Exit(3)
	}
	fmt.Println("up")
	_, _ = io.Copy(io.Discard, in)
}

// TestLoopbackUpWaitsForTheLoopback: loopbackUp does not return while the
// namespace's loopback is down. Its first pause brings the loopback up
// (through the helper, in a namespace of its own), and it returns true,
// having paused, once the loopback is up.
func TestLoopbackUpWaitsForTheLoopback(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), loopbackHelperEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		if os.Getenv("OECP_REQUIRE_SANDBOX") == "1" {
			t.Fatalf("a process in a network namespace of its own: %v", err)
		}
		t.Skipf("no network namespace of its own for a process: %v", err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	pauses := 0
	loopbackPause = func(time.Duration) {
		if pauses++; pauses == 1 {
			if _, err := io.WriteString(stdin, "go\n"); err != nil {
				t.Error(err)
			}
			if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "up\n" {
				t.Errorf("the helper said %q, want up", line)
			}
		}
	}
	t.Cleanup(func() { loopbackPause = time.Sleep })
	if !loopbackUp(cmd.Process.Pid) {
		t.Fatal("loopbackUp gave up")
	}
	if pauses == 0 {
		t.Fatal("loopbackUp returned while the loopback was still down")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/fib_trie", cmd.Process.Pid))
	if err != nil || !bytes.Contains(b, []byte("127.0.0.1")) {
		t.Fatalf("after loopbackUp the namespace's table is %q (%v)", b, err)
	}
}

// TestLoopbackUpOfAProcessGone returns at once: nothing is left to wait
// for.
func TestLoopbackUpOfAProcessGone(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	loopbackPause = func(time.Duration) { t.Error("loopbackUp paused for a process that is gone") }
	t.Cleanup(func() { loopbackPause = time.Sleep })
	if !loopbackUp(cmd.Process.Pid) {
		t.Fatal("loopbackUp gave up")
	}
}
