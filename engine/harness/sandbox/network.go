package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// maxNetworkDiagnostic bounds what pasta's stderr adds to an error.
const maxNetworkDiagnostic = 2 << 10

// network is the user-mode network of one sandbox: a pasta process,
// killed with the server (parent-death signal) or at stop.
type network struct {
	cmd  *exec.Cmd
	once sync.Once
	// reaped is closed once pasta's process was waited for.
	reaped chan struct{}
}

// exited reports whether pasta has exited (without reaping it: stop does).
func (n *network) exited() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, n.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err != nil || info.Signo != 0
}

// connectPid connects the network namespace of process pid (connect),
// once bwrap has brought the namespace's loopback up (loopbackUp).
func (h *Host) connectPid(pid int) (*network, error) {
	if !loopbackUp(pid) {
		h.log.Warn("sandbox: the sandbox's loopback was not up in time; its network is connected regardless", "waited", loopbackWait)
	}
	netns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, err
	}
	defer netns.Close()
	return h.connect(netns, nil)
}

// connect gives the network namespace netns an interface to the outside
// world through pasta, which does not map the host's loopback (the
// gateway address reaches the real gateway) and forwards only the allowed
// ports from the namespace's 127.0.0.1 to the host's. It returns once
// pasta has configured the namespace. sched, when not nil, schedules
// pasta while it configures a namespace made ahead.
func (h *Host) connect(netns *os.File, sched *aheadSched) (*network, error) {
	ready, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer ready.Close()
	args := []string{"--foreground", "--quiet", "--config-net", "--no-map-gw",
		"-t", "none", "-u", "none", "-U", "none", "-T", tcpPorts(h.cfg.AllowPorts)}
	var files []*os.File
	if h.root {
		// As root pasta would drop to nobody, which may not open the
		// namespace; it keeps only its network capabilities.
		files = []*os.File{netns, readyW}
		args = append(args, "--runas", "0", "--netns", "/proc/self/fd/3", "--pid", "/proc/self/fd/4")
	} else {
		// The namespace belongs to the sandbox's user namespace: pasta
		// joins the one that owns it.
		fd, err := unix.IoctlRetInt(int(netns.Fd()), unix.NS_GET_USERNS)
		if err != nil {
			readyW.Close()
			return nil, fmt.Errorf("owner of the network namespace: %w", err)
		}
		userns := os.NewFile(uintptr(fd), "userns")
		defer userns.Close()
		files = []*os.File{userns, netns, readyW}
		args = append(args, "--userns", "/proc/self/fd/3", "--netns", "/proc/self/fd/4", "--pid", "/proc/self/fd/5")
	}
	var stderr bytes.Buffer
	cmd, err := h.startHuge(func() *exec.Cmd {
		stderr.Reset()
		cmd := exec.Command(h.pasta, args...)
		cmd.Args[0] = programPasta // passt is pasta by this name
		cmd.Env = []string{}
		cmd.ExtraFiles = files
		cmd.Stderr = &limitedWriter{w: &stderr, n: maxNetworkDiagnostic}
		pdeathsig(cmd)
		return cmd
	}, sched)
	readyW.Close()
	if err != nil {
		return nil, fmt.Errorf("pasta: %w", err)
	}
	n := &network{cmd: cmd, reaped: make(chan struct{})}
	// pasta writes its PID file once the namespace is configured; EOF
	// means it exited first.
	line, _ := bufio.NewReader(ready).ReadString('\n')
	sched.hurry()
	if _, err := strconv.Atoi(strings.TrimSpace(line)); err != nil {
		n.stop()
		<-n.reaped // its stderr is whole once it is reaped
		return nil, fmt.Errorf("pasta did not start: %s", strings.TrimSpace(stderr.String()))
	}
	return n, nil
}

// tcpPorts is pasta's -T specification of the allowed ports.
func tcpPorts(ports []int) string {
	if len(ports) == 0 {
		return "none"
	}
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// stop kills pasta; a nil network has nothing to stop. It returns once
// SIGKILL is sent, after which pasta runs nothing more: the kernel's
// teardown of its process takes tens of milliseconds, and the caller (a
// run's end, on the engine's path) does not wait for it. pasta is reaped
// on a goroutine of its own, which closes reaped.
func (n *network) stop() {
	if n == nil {
		return
	}
	n.once.Do(func() {
		_ = n.cmd.Process.Kill()
		go func() {
			defer close(n.reaped)
			_ = n.cmd.Wait()
		}()
	})
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
	n  int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// loopbackWait bounds loopbackUp's wait.
const loopbackWait = 5 * time.Second

// loopbackPause is loopbackUp's wait between two reads (a test hook).
var loopbackPause = time.Sleep

// loopbackUp returns once the loopback of process pid's network namespace
// is up, or the process is gone (true), or loopbackWait has passed
// (false). bwrap tells its sandbox's PID before the sandbox has set up the
// loopback of the network namespace it made; pasta, configuring the same
// namespace, also brings the loopback up, which gives it 127.0.0.1, and
// bwrap's own setup then fails to add that address. The loopback is up
// once the namespace's routing table holds 127.0.0.1. Nothing of the
// sandbox has run yet: the table is bwrap's and the kernel's.
func loopbackUp(pid int) bool {
	path := fmt.Sprintf("/proc/%d/net/fib_trie", pid)
	deadline := time.Now().Add(loopbackWait)
	for pause := 50 * time.Microsecond; ; pause = min(2*pause, time.Millisecond) {
		b, err := os.ReadFile(path)
		switch {
		case err != nil || bytes.Contains(b, []byte("127.0.0.1")):
			return true
		case time.Now().After(deadline):
			return false
		}
		loopbackPause(pause)
	}
}
