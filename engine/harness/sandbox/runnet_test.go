package sandbox

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/oecp/oecp/internal/testkit"
	"golang.org/x/sys/unix"
)

// A run's writer UID leased while its workspace is made is the one its
// executions run under, and its end gives it back; a run that ends
// while the lease is being taken keeps none.
func TestWriterLeasedAheadIsTheRuns(t *testing.T) {
	h := &Host{log: slog.New(slog.DiscardHandler), root: true, writers: map[string]*lease{},
		nets:   map[string][]*runNetwork{"run": nil, "late": nil}, // open, as Prepare leaves them
		leases: mustLeases(t, UIDRange{From: 2101000220, To: 2101000222})}
	h.leaseWriter("run")
	ahead := h.writers["run"]
	if ahead == nil {
		t.Fatal("no writer UID leased ahead")
	}
	if l, err := h.writer("run"); err != nil || l != ahead {
		t.Fatalf("the run's execution leased %v (%v), not the UID leased ahead", l, err)
	}
	h.leaseWriter("run") // leased already: nothing more
	if n := len(h.leases.held); n != 1 {
		t.Fatalf("%d UIDs held, want the run's one", n)
	}
	h.CloseRun("run")
	if n := len(h.leases.held); n != 0 {
		t.Fatalf("%d UIDs held after the run's end", n)
	}

	inScan, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	procScanHook = func() { once.Do(func() { close(inScan); <-release }) }
	t.Cleanup(func() { procScanHook = nil })
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.leaseWriter("late")
	}()
	testkit.Recv(t, inScan)
	h.CloseRun("late")
	close(release)
	testkit.Recv(t, done)
	h.leases.mu.Lock()
	held := len(h.leases.held)
	h.leases.mu.Unlock()
	if _, ok := h.writers["late"]; ok || held != 0 {
		t.Fatalf("a run ended during its lease keeps a writer UID (%d held)", held)
	}
}

// Writer answers the writer UID being leased ahead once the lease is
// taken, waiting for it rather than leasing a second; a run with no lease
// ahead has none (its first execution leases), nor has a nil host.
func TestWriterWaitsForTheLeaseAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &Host{log: slog.New(slog.DiscardHandler), root: true, writers: map[string]*lease{}, leasing: map[string]chan struct{}{},
			nets:   map[string][]*runNetwork{"run": nil}, // open, as Prepare leaves it
			leases: mustLeases(t, UIDRange{From: 2101000230, To: 2101000232})}
		release := make(chan struct{})
		var once sync.Once
		procScanHook = func() { once.Do(func() { <-release }) }
		t.Cleanup(func() { procScanHook = nil })
		h.mu.Lock()
		h.leaseAhead("run")
		h.mu.Unlock()
		type answer struct {
			uid int
			ok  bool
		}
		got := make(chan answer, 1)
		go func() {
			uid, ok := h.Writer("run")
			got <- answer{uid, ok}
		}()
		synctest.Wait() // the lease held in its scan, Writer waiting or done
		select {
		case a := <-got:
			t.Fatalf("Writer answered %+v while the lease was being taken", a)
		default:
		}
		close(release)
		a := testkit.Recv(t, got)
		h.mu.Lock()
		ahead := h.writers["run"]
		h.mu.Unlock()
		if ahead == nil || !a.ok || a.uid != int(ahead.uid) {
			t.Fatalf("Writer answered %+v, the lease ahead is %v", a, ahead)
		}
		if n := len(h.leases.held); n != 1 {
			t.Fatalf("%d UIDs held, want the run's one", n)
		}
		if uid, ok := h.Writer("other"); ok {
			t.Fatalf("a run with no lease ahead answered UID %d", uid)
		}
		if _, ok := (*Host)(nil).Writer("run"); ok {
			t.Fatal("a nil host answered a UID")
		}
		h.CloseRun("run")
		if _, ok := h.Writer("run"); ok {
			t.Fatal("an ended run still answers its writer UID")
		}
	})
}

// newNetNamespace makes a namespace of its own each time, neither the
// server's nor another's, and the server stays in its own.
func TestNewNetNamespaceIsNew(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace needs root")
	}
	ino := func(f *os.File) uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	own, err := os.Open("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	a, err := newNetNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := newNetNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if ino(a) == ino(own) || ino(b) == ino(own) || ino(a) == ino(b) {
		t.Fatalf("namespaces %d and %d, the server's %d", ino(a), ino(b), ino(own))
	}
	after, err := os.Open("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if ino(after) != ino(own) {
		t.Fatal("the server left its own network namespace")
	}
}

// Making network namespaces ends no thread of the server: a process the
// server started with a parent-death signal (its git commands) lives on
// whichever thread started it. Each child here is started from a thread
// of its own, so that the namespaces' threads are likely to be threads
// that started one.
func TestNewNetNamespaceKillsNoChild(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace needs root")
	}
	const children = 16
	var cmds []*exec.Cmd
	for range children {
		started := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cmd := exec.Command("sleep", "60")
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			err := cmd.Start()
			if err == nil {
				cmds = append(cmds, cmd)
			}
			started <- err
		}()
		if err := testkit.Recv(t, started); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	for range 4 * children {
		f, err := newNetNamespace()
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for _, c := range cmds {
		// A killed child is a zombie until it is waited for: its state
		// (the field after the command's closing parenthesis) says so.
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		_, after, _ := strings.Cut(string(stat), ") ")
		if strings.HasPrefix(after, "Z") {
			t.Fatalf("child %d was killed while namespaces were made", c.Process.Pid)
		}
	}
}

// From a host's first Prepare on, it keeps Config.NetworksAhead network
// namespaces made ahead, their pasta running at normal priority once
// made; a run's Prepare is given the oldest instead of a new one, unless
// its pasta has died, and the host makes another in its place, never more
// than NetworksAhead. Close ends them, and a closed host makes none.
func TestNetworksMadeAheadAreTheNextRuns(t *testing.T) {
	h := requireHost(t, Config{NetworksAhead: 2})
	if !h.root {
		t.Skip("runs get network namespaces of their own only on a root server")
	}
	spares := func() []*runNetwork {
		h.spareWG.Wait()
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.Clone(h.spares)
	}
	runNets := func(run string) []*runNetwork {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.Clone(h.nets[run])
	}
	if n := len(spares()); n != 0 {
		t.Fatalf("%d networks made ahead before any run was prepared", n)
	}
	h.Prepare("a")
	h.awaitPrepared("a")
	ahead := spares()
	if len(ahead) != 2 || ahead[0] == ahead[1] || slices.Contains(ahead, runNets("a")[0]) {
		t.Fatalf("after the first run's Prepare, made ahead: %v (the run has %v)", ahead, runNets("a"))
	}
	for _, n := range ahead {
		if err := n.net.cmd.Process.Signal(syscall.Signal(0)); err != nil {
			t.Fatalf("the pasta of a network made ahead: %v", err)
		}
		attr, err := unix.SchedGetAttr(n.net.cmd.Process.Pid, 0)
		if err != nil || attr.Policy != unix.SCHED_NORMAL {
			t.Fatalf("a network made ahead has its pasta at policy %v (%v), not normal", attr, err)
		}
	}
	h.Prepare("b")
	h.awaitPrepared("b")
	if nets := runNets("b"); len(nets) != 1 || nets[0] != ahead[0] {
		t.Fatalf("the next run got %v, not the oldest network made ahead %p", nets, ahead[0])
	}
	now := spares()
	if len(now) != 2 || now[0] != ahead[1] || slices.Contains(ahead, now[1]) {
		t.Fatalf("made ahead after the second run took one: %v (before: %v)", now, ahead)
	}
	h.CloseRun("a")
	h.CloseRun("b")
	if n := len(spares()); n != 2 {
		t.Fatalf("%d networks made ahead after two runs' ends, want 2", n)
	}
	// One whose pasta died is not given: the run gets a new one.
	dead := spares()[0]
	if err := dead.net.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { // waits for the exit without reaping it
		var info unix.Siginfo
		exited <- unix.Waitid(unix.P_PID, dead.net.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	}()
	if err := testkit.Recv(t, exited); err != nil {
		t.Fatal(err)
	}
	h.Prepare("dead")
	h.awaitPrepared("dead")
	if nets := runNets("dead"); len(nets) != 1 || nets[0] == dead || nets[0].net.exited() {
		t.Fatalf("the run after a dead pasta got %v", nets)
	}
	testkit.Recv(t, dead.net.reaped)
	h.CloseRun("dead")
	left := spares()
	h.Close()
	for _, n := range left {
		testkit.Recv(t, n.net.reaped)
	}
	if n := len(spares()); n != 0 {
		t.Fatalf("Close left %d networks made ahead", n)
	}
	h.Prepare("c")
	h.awaitPrepared("c")
	h.CloseRun("c")
	if n := len(spares()); n != 0 {
		t.Fatalf("a closed host made %d networks ahead", n)
	}
}

// MakeNetworksAhead makes NetworksAhead networks before any run is
// prepared (a server's start), each with its pasta running.
func TestNetworksMadeAheadAtStart(t *testing.T) {
	h := requireHost(t, Config{NetworksAhead: 1})
	if !h.root {
		t.Skip("runs get network namespaces of their own only on a root server")
	}
	h.MakeNetworksAhead()
	h.spareWG.Wait()
	h.mu.Lock()
	spares := slices.Clone(h.spares)
	h.mu.Unlock()
	if len(spares) != 1 || spares[0].net.exited() {
		t.Fatalf("made ahead at the start: %v", spares)
	}
}

// With NetworksAhead negative a host makes no network ahead: each run's
// Prepare makes its own.
func TestNoNetworksMadeAhead(t *testing.T) {
	h := requireHost(t, Config{NetworksAhead: -1})
	if !h.root {
		t.Skip("runs get network namespaces of their own only on a root server")
	}
	h.Prepare("a")
	h.awaitPrepared("a")
	h.CloseRun("a")
	h.spareWG.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.spares) != 0 || h.spareMade != nil {
		t.Fatalf("networks made ahead: %v (one being made: %v)", h.spares, h.spareMade != nil)
	}
}

// An execution of a run runs in the run's network namespace, never the
// server's: the server starts its sandbox from a thread that entered the
// namespace, and that thread, the only one of the server's ever in it,
// has left it once the execution's cleanup has returned.
func TestExecutionsRunInTheirRunsNetwork(t *testing.T) {
	h := requireHost(t, Config{NetworksAhead: -1})
	if !h.root {
		t.Skip("runs get network namespaces of their own only on a root server")
	}
	ws := t.TempDir()
	defer h.CloseRun("r")
	e, err := h.Start(Spec{Run: "r", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.net == nil {
		t.Fatal("a root server's execution has no run network")
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(e.net.ns.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	runNet := fmt.Sprintf("net:[%d]", st.Ino)
	hostNet, err := os.Readlink("/proc/self/ns/net")
	if err != nil || hostNet == runNet {
		t.Fatalf("the server's namespace %q (%v) is the run's %q", hostNet, err, runNet)
	}
	threadsIn := func(ns string) int {
		tasks, _ := os.ReadDir("/proc/self/task")
		n := 0
		for _, task := range tasks {
			if l, _ := os.Readlink("/proc/self/task/" + task.Name() + "/ns/net"); l == ns {
				n++
			}
		}
		return n
	}

	cmd := exec.Command("/bin/sh", "-c", `readlink /proc/self/ns/net; read -r _; exit 0`)
	cmd.Dir = ws
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	stdin, out, cleanup := startConfined(t, e, cmd)
	line, _ := bufio.NewReader(out).ReadString('\n')
	if got := strings.TrimSpace(line); got != runNet {
		t.Errorf("the agent's network namespace is %q, not its run's %q (the server's is %q)", got, runNet, hostNet)
	}
	if n := threadsIn(runNet); n != 1 {
		t.Errorf("%d of the server's threads are in the run's namespace while its execution runs, want the one that started it", n)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("the agent: %v", err)
	}
	cleanup()
	if n := threadsIn(runNet); n != 0 {
		t.Fatalf("%d of the server's threads are still in the run's namespace after its execution's cleanup", n)
	}
}
