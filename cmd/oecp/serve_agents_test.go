package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/engine/harness/sandbox/sandboxtest"
	"github.com/oecp/oecp/internal/testkit"
)

// nobodyUID is the unprivileged user the server runs as in the tests of
// an unprivileged server.
const nobodyUID = 65534

// hostileGraph is a step "work" then a verifier "check", both given
// instructions; the agent reads its mode from them.
func hostileGraph(t *testing.T, dir, mode string) string {
	t.Helper()
	g := `{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},
"policy":{"policy":"policy.default@1","default":"deny"},
"root":{"kind":"seq","name":"main","state":{"kind":"null"},"children":[
{"kind":"step","name":"work","worker":"agent.work@1","instructions":"MODE ` + mode + `","input":{"kind":"null"},"output":{"kind":"null"},
 "inputBindings":[],"writeBindings":[],"timeoutMs":600000,"attempts":1},
{"kind":"verifier","name":"check","worker":"agent.check@1","instructions":"MODE ` + mode + `","input":{"kind":"null"},"output":{"kind":"null"},
 "inputBindings":[],"writeBindings":[],"timeoutMs":600000,"attempts":1,"signals":{"verdict":["ok","bad"]},"diagnostic":{"kind":"null"}},
{"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}],"promotedStatePaths":[]}}`
	path := filepath.Join(dir, "graph-"+mode+".json")
	rt := `{"harness":"codex","provider":"openai","size":"tiny","nodes":{"work":{"kind":"agent","model":"gpt-5.6"},"check":{"kind":"agent","model":"gpt-5.6"}}}`
	if err := os.WriteFile(path, []byte(g), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "runtime.json"), []byte(rt), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// hostileSetup is a server home (mode 0700, owned by uid) holding the data
// directory, a world-readable harness file that runs the hostile agent and
// a world-readable file; the agent and the binary are installed
// world-readable outside it.
type hostileSetup struct {
	home, data, harness, homeFile string
	install                       string // agent, ports file, graphs
	bin                           string
	secret                        string
	allowed                       net.Listener
	greetings                     chan string
	// gateway names the allowed port as the harness entry's baseUrl
	// instead of passing --agent-allow-port.
	gateway bool
	log     lockedBuilder // the server's log
}

// lockedBuilder keeps lines written from one goroutine and read from
// another.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(line + "\n")
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newHostileSetup(t *testing.T, uid int) *hostileSetup {
	t.Helper()
	base := t.TempDir()
	install := filepath.Join(base, "install")
	s := &hostileSetup{home: filepath.Join(base, "home"), install: install, secret: fmt.Sprintf("only-the-server-knows-%d", time.Now().UnixNano())}
	s.data, s.harness, s.homeFile = filepath.Join(s.home, "data"), filepath.Join(s.home, "harness.json"), filepath.Join(s.home, "notes.txt")
	// t.TempDir's own parent is private to the test's user too.
	for _, d := range []string{filepath.Dir(base), base, install} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(d, 0o755)
	}
	if err := os.MkdirAll(s.data, 0o700); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("testdata/hostile-agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(install, "hostile-agent.sh")
	s.bin = filepath.Join(install, "oecp")
	bin, err := os.ReadFile(oecpBin)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{agent: script, s.bin: bin, s.homeFile: []byte("a note only the server's user should read\n"),
		s.harness: fmt.Appendf(nil, `{"codex":{"driver":"command","argv":["/bin/bash",%q,%q,%q,%q,%q,%q]}}`, agent, install, s.data, s.harness, s.homeFile, s.secret)}
	for path, body := range files {
		if err := os.WriteFile(path, body, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	chownTree(t, s.home, uid)
	if err := os.Chmod(s.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if s.allowed, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.allowed.Close() })
	s.greetings = make(chan string, 16)
	go func() {
		for {
			c, err := s.allowed.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			_, _ = c.Write([]byte("ok\n"))
			c.Close()
			s.greetings <- strings.TrimSpace(line)
		}
	}()
	return s
}

func (s *hostileSetup) allowedPort() string {
	return fmt.Sprint(s.allowed.Addr().(*net.TCPAddr).Port)
}

// start runs the server as uid with the tokenless loopback default, the
// secret in its environment, and writes the ports file the agent reads.
func (s *hostileSetup) start(t *testing.T, uid int, extra ...string) *testServer {
	t.Helper()
	allow := []string{"--agent-allow-port", s.allowedPort()}
	if s.gateway {
		allow = nil
		h, err := os.ReadFile(s.harness)
		if err != nil {
			t.Fatal(err)
		}
		h = bytes.Replace(h, []byte(`"driver"`), fmt.Appendf(nil, `"baseUrl":"http://127.0.0.1:%s/v1","driver"`, s.allowedPort()), 1)
		if err := os.WriteFile(s.harness, h, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	args := append(append([]string{"serve", "--listen", "127.0.0.1:0", "--data", s.data, "--harness", s.harness,
		"--shutdown-grace", "100ms"}, allow...), extra...)
	cmd := exec.Command(s.bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.home, "OECP_HOSTILE_SECRET=" + s.secret}
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	srv := runServer(t, cmd, &s.log)
	port := regexp.MustCompile(`:(\d+)/`).FindStringSubmatch(srv.url)
	if err := os.WriteFile(filepath.Join(s.install, "ports"), []byte(port[1]+" "+s.allowedPort()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv
}

// runServer starts cmd (an `oecp serve`) and waits for its URL.
func runServer(t *testing.T, cmd *exec.Cmd, log *lockedBuilder) *testServer {
	t.Helper()
	stderr := testkit.StartStderr(t, cmd)
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`url=(wss?://\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			} else {
				log.add(sc.Text())
			}
		}
		close(urlc)
		_, _ = io.Copy(io.Discard, stderr)
	}()
	srv := &testServer{cmd: cmd, cache: t.TempDir()}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	u, ok := testkit.RecvOK(t, urlc)
	if !ok {
		t.Fatalf("oecp serve exited before announcing its URL")
	}
	srv.url = u
	return srv
}

// probes runs the hostile graph as run id and returns its PROBE lines by
// "node name".
func probes(t *testing.T, srv *testServer, s *hostileSetup, id, mode string) (map[string]string, result) {
	t.Helper()
	graph := hostileGraph(t, s.install, mode)
	w := oecp(t, srv, "run", "submit", "-f", graph, "--runtime", filepath.Join(s.install, "runtime.json"), "--source", testSource, "--id", id, "--watch")
	logs := oecp(t, srv, "run", "logs", id)
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`PROBE (\w+) (\w+) (\S+)`).FindAllStringSubmatch(logs.stdout, -1) {
		out[m[1]+" "+m[2]] = m[3]
	}
	return out, w
}

// requireSandbox skips the test where this host cannot confine agents
// (fails it under OECP_REQUIRE_SANDBOX=1).
func requireSandbox(t *testing.T) {
	t.Helper()
	sandboxtest.Require(t, sandbox.Config{})
}

// TestAgentSandboxHostileAgent runs a hostile agent, as a writer and as a
// verifier, on a root server and on an unprivileged one, each with the
// tokenless loopback default: it reads no secret of the server's
// environment, nothing of the data directory outside its own run, not the
// server's (world-readable) configuration or home; it sees no other run
// and none of the server's processes; it cannot reach the server's port
// but reaches the allowed one; the writer writes its workspace and runs
// git there, the verifier cannot write it.
func TestAgentSandboxHostileAgent(t *testing.T) {
	requireSandbox(t)
	for _, uid := range serverUIDs() {
		t.Run(fmt.Sprintf("uid-%d", uid), func(t *testing.T) {
			if uid != 0 {
				// The unprivileged server needs its own sandbox: user
				// namespaces and /dev/net/tun for pasta.
				if err := canReadWrite("/dev/net/tun"); err != nil && os.Getenv(sandboxtest.RequireEnv) != "1" {
					t.Skipf("an unprivileged server has no network for agents: %v (.ci/install-deps fixes it)", err)
				}
			}
			s := newHostileSetup(t, uid)
			srv := s.start(t, uid)
			first, w := probes(t, srv, s, "first", "probe")
			if w.code != 0 {
				t.Fatalf("first run: exit %d\n%s\n%s\n%v", w.code, w.stdout, w.stderr, first)
			}
			got, w := probes(t, srv, s, "second", "probe")
			if w.code != 0 {
				t.Fatalf("second run: exit %d\n%s\n%s", w.code, w.stdout, w.stderr)
			}
			want := map[string]string{}
			for _, node := range []string{"work", "check"} {
				for k, v := range map[string]string{"environ": "hidden", "server": "hidden", "datafiles": "0", "harness": "0",
					"homefile": "0", "nested": "0", "otherruns": "0", "serverport": "closed", "allowedport": "open"} {
					want[node+" "+k] = v
				}
			}
			want["work write"], want["check write"], want["work git"] = "ok", "denied", "ok"
			// Both runs' probes are checked: each greeting awaited below
			// is one of their allowedport probes that answered open.
			for _, run := range []struct {
				name string
				got  map[string]string
			}{{"first", first}, {"second", got}} {
				for k, v := range want {
					if run.got[k] != v {
						t.Errorf("%s run: %s: %q, want %q (all: %v)", run.name, k, run.got[k], v, run.got)
					}
				}
				if n := run.got["work procs"]; n == "" || len(n) > 1 {
					t.Errorf("%s run: the writer sees %q processes, want a handful of its own", run.name, n)
				}
			}
			if t.Failed() {
				t.Logf("the server's log:\n%s", s.log.String())
				for _, id := range []string{"first", "second"} {
					t.Logf("run %s's log:\n%s", id, oecp(t, srv, "run", "logs", id).stdout)
				}
				return // the greetings below may never come
			}
			for range 4 { // two runs, each a writer and a verifier
				if g := testkit.Recv(t, s.greetings); !strings.HasPrefix(g, "hello-from-") {
					t.Errorf("allowed port got %q", g)
				}
			}
			matches, _ := filepath.Glob(filepath.Join(s.data, "runs", "*", "*", "workspace", "intruder"))
			if len(matches) > 0 {
				t.Errorf("an agent wrote into another run's workspace: %v", matches)
			}
		})
	}
}

// TestAgentSandboxReachesTheHarnessGateway: a harness entry whose baseUrl
// names this host's loopback (a local model gateway) has that port
// reachable from inside the sandbox without --agent-allow-port, and the
// server's own port stays closed.
func TestAgentSandboxReachesTheHarnessGateway(t *testing.T) {
	requireSandbox(t)
	s := newHostileSetup(t, 0)
	s.gateway = true
	srv := s.start(t, 0)
	got, w := probes(t, srv, s, "gateway", "probe")
	if w.code != 0 {
		t.Fatalf("exit %d\n%s\n%s\n%v", w.code, w.stdout, w.stderr, got)
	}
	for _, node := range []string{"work", "check"} {
		if got[node+" allowedport"] != "open" || got[node+" serverport"] != "closed" {
			t.Errorf("%s: gateway port %q, server port %q (all: %v)", node, got[node+" allowedport"], got[node+" serverport"], got)
		}
	}
}

// canReadWrite checks that this process may read and write path.
func canReadWrite(path string) error {
	return syscall.Access(path, 6)
}

// TestAgentSandboxLimits: on a root server with --agent-max-procs and
// --agent-max-memory, a fork storm and a memory hog each end their own
// execution crashed, with a line naming the limit, while the server goes
// on and a quiet run beside them succeeds.
func TestAgentSandboxLimits(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("the cgroup limits need a root server here")
	}
	s := newHostileSetup(t, 0)
	srv := s.start(t, 0, "--agent-max-procs", "32", "--agent-max-memory", "64M")
	for _, tc := range []struct{ mode, limit string }{{"storm", "agent-max-procs"}, {"hog", "agent-max-memory"}} {
		probes(t, srv, s, tc.mode, tc.mode)
		logs := oecp(t, srv, "run", "logs", tc.mode)
		if !strings.Contains(logs.stdout, "it hit its --"+tc.limit+" limit") {
			t.Errorf("%s: no line names the limit:\n%s", tc.mode, logs.stdout)
		}
		// The graph routes a crashed step on to its verifier, which
		// crashes too; the run itself goes on to its end.
		ended := regexp.MustCompile(`agent execution ended: it hit its limit.* limit=` + tc.limit)
		if n := len(ended.FindAllString(s.log.String(), -1)); n != 2 {
			t.Errorf("%s: %d executions ended on the limit, want 2:\n%s", tc.mode, n, s.log.String())
		}
	}
	if _, w := probes(t, srv, s, "quiet", "quiet"); w.code != 0 {
		t.Fatalf("a quiet run after them: exit %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
}

// agentDeathBound bounds the wait for an agent to die with its server.
const agentDeathBound = 60 * time.Second

// TestAgentDiesWithServer: an agent whose server is SIGKILLed dies with
// it, in its sandbox (the sandbox's init too) and unconfined.
func TestAgentDiesWithServer(t *testing.T) {
	requireSandbox(t)
	for _, mode := range []string{"sandboxed", "unconfined"} {
		t.Run(mode, func(t *testing.T) {
			s := newHostileSetup(t, os.Geteuid())
			var extra []string
			if mode == "unconfined" {
				extra = append(extra, "--agent-unconfined")
			}
			srv := s.start(t, os.Geteuid(), extra...)
			graph := hostileGraph(t, s.install, "sleeper")
			expect(t, oecp(t, srv, "run", "submit", "-f", graph, "--runtime", filepath.Join(s.install, "runtime.json"), "--source", testSource, "--id", "sleeper"), 0, nil, nil)
			logs := startCLI(t, srv, "run", "logs", "sleeper", "--follow")
			logs.waitStdout("sleeper started")
			sleeper := findAgent(t, s.secret)
			t.Cleanup(func() { _ = syscall.Kill(sleeper, syscall.SIGKILL) }) // should it outlive the test
			var fds []unix.PollFd
			watch := func(pid int, mayBeGone bool) {
				fd, err := unix.PidfdOpen(pid, 0)
				if mayBeGone && err == unix.ESRCH {
					return // gone before the server: it cannot outlive it
				}
				if err != nil {
					t.Fatalf("pidfd of %d: %v", pid, err)
				}
				t.Cleanup(func() { unix.Close(fd) })
				fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			}
			watch(sleeper, false)
			if mode == "sandboxed" {
				// The sandbox's init, and the server's networks: the run's
				// and those made ahead, one of which may be replaced (its
				// pasta killed and reaped) between the listing and here.
				watch(parentOf(t, sleeper), false)
				for _, pid := range childrenNamed(t, srv.cmd.Process.Pid, "pasta", "passt") {
					watch(pid, true)
				}
			}
			if err := srv.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(agentDeathBound)
			for _, fd := range fds {
				// A pidfd becomes readable when its process has exited.
				n, err := unix.Poll([]unix.PollFd{fd}, int(time.Until(deadline)/time.Millisecond))
				for err == unix.EINTR {
					n, err = unix.Poll([]unix.PollFd{fd}, int(time.Until(deadline)/time.Millisecond))
				}
				if err != nil || n != 1 {
					t.Fatalf("an agent process outlived its SIGKILLed server (%d, %v)", n, err)
				}
			}
		})
	}
}

// procs lists the PIDs /proc holds.
func procs() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// procFile is /proc/PID/name, nil when it cannot be read (the process
// is gone).
func procFile(pid int, name string) []byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + name)
	if err != nil {
		return nil
	}
	return b
}

// findAgent returns the PID of the agent process whose arguments hold
// secret: the shell that says the sleeper started, or the sleep it becomes
// (one PID; its arguments hold the secret before it says so), never the
// sandbox's bwrap processes, whose arguments hold it too. While the shell
// is becoming the sleep, /proc shows the process without arguments, so a
// scan that finds none scans again (until HangGuard).
func findAgent(t *testing.T, secret string) int {
	t.Helper()
	for deadline := time.Now().Add(testkit.HangGuard); time.Now().Before(deadline); runtime.Gosched() {
		for _, pid := range procs() {
			comm, b := procFile(pid, "comm"), procFile(pid, "cmdline")
			if strings.TrimSpace(string(comm)) != "bwrap" && strings.Contains(string(b), secret) {
				return pid
			}
		}
	}
	t.Fatalf("no agent process")
	return 0
}

// childrenNamed lists the children of pid whose command name starts with
// one of names.
func childrenNamed(t *testing.T, pid int, names ...string) []int {
	t.Helper()
	var out []int
	for _, child := range procs() {
		comm := procFile(child, "comm")
		if comm == nil {
			continue
		}
		for _, n := range names {
			if ppid, ok := ppidOf(child); ok && ppid == pid && strings.HasPrefix(string(comm), n) {
				out = append(out, child)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no child %v of %d", names, pid)
	}
	return out
}

// parentOf is the parent PID of pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	ppid, ok := ppidOf(pid)
	if !ok {
		t.Fatalf("no process %d", pid)
	}
	return ppid
}

// ppidOf reads the parent PID of pid; false when pid is gone.
func ppidOf(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := strings.LastIndexByte(string(b), ')')
	if err != nil || i < 0 {
		return 0, false
	}
	// pid (comm) state ppid ...; comm may hold spaces, not ')'.
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}

// TestServeAgentSandboxRefusals: a host without the sandbox's programs
// refuses --harness and says what is missing, unless --agent-unconfined
// (a WARN at start); bad agent flags are usage errors.
func TestServeAgentSandboxRefusals(t *testing.T) {
	s := newHostileSetup(t, os.Geteuid())
	run := func(env []string, args ...string) (int, string) {
		cmd := exec.Command(s.bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data", s.data, "--harness", s.harness}, args...)...)
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, stderr.String()
	}
	code, stderr := run([]string{"PATH=/nonexistent", "HOME=" + s.home})
	if code != 2 || !strings.Contains(stderr, "bwrap (Debian package bubblewrap)") || !strings.Contains(stderr, "--agent-unconfined") {
		t.Errorf("without bwrap: exit %d\n%s", code, stderr)
	}
	for _, bad := range [][]string{{"--agent-allow-port", "0"}, {"--agent-max-memory", "12X"}, {"--agent-uid-range", "9-1"}, {"--agent-max-procs", "-1"}, {"--agent-max-disk", "-1"}, {"--agent-max-disk", "10T"}, {"--agent-networks-ahead", "-1"}} {
		if code, stderr := run(nil, bad...); code != 2 || !strings.Contains(stderr, bad[0]) {
			t.Errorf("%v: exit %d\n%s", bad, code, stderr)
		}
	}
	cmd := exec.Command(s.bin, "serve", "--listen", "127.0.0.1:0", "--data", s.data, "--harness", s.harness, "--agent-unconfined")
	cmd.Env = []string{"PATH=/nonexistent", "HOME=" + s.home}
	runServer(t, cmd, &s.log)
	if !regexp.MustCompile(`WARN.*agents run unconfined`).MatchString(s.log.String()) {
		t.Errorf("no WARN about unconfined agents:\n%s", s.log.String())
	}
}

// TestServersKilledDuringAgentSetupLeaveNoAgent SIGKILLs servers at random
// points from a run's submission through its agent's sandbox setup, a
// fresh server each time, while another server runs on the host: no
// process of any of their agents remains (what a killed server's sandbox
// left waiting in its setup is swept by the live server).
func TestServersKilledDuringAgentSetupLeaveNoAgent(t *testing.T) {
	requireSandbox(t)
	survivor := newHostileSetup(t, os.Geteuid())
	survivor.start(t, os.Geteuid())
	var secrets []string
	for i := range 8 {
		s := newHostileSetup(t, os.Geteuid())
		secrets = append(secrets, s.secret)
		srv := s.start(t, os.Geteuid())
		graph := hostileGraph(t, s.install, "sleeper")
		expect(t, oecp(t, srv, "run", "submit", "-f", graph, "--runtime", filepath.Join(s.install, "runtime.json"), "--source", testSource, "--id", "sleeper"), 0, nil, nil)
		time.Sleep(time.Duration(rand.IntN(40*(i+1))) * time.Millisecond) // a random point of the setup, later each round
		if err := srv.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	// What is left (a sandbox waiting in bwrap's setup) goes at the
	// survivor's next sweeps, every 5 s: wait for each, bounded.
	deadline := time.Now().Add(30 * time.Second)
	var left []int
	for _, pid := range agentsOf(secrets) {
		if !testkit.Exited(testkit.Pidfd(t, pid), time.Until(deadline)) {
			left = append(left, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// Nothing started meanwhile either (an agent a sandbox ran late).
	for _, pid := range agentsOf(secrets) {
		left = append(left, pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if len(left) > 0 {
		t.Fatalf("processes of killed servers' agents remain: %v", left)
	}
}

// agentsOf lists the live processes (zombies aside) whose command line
// holds one of secrets: agents, their sandboxes' bwrap, their pasta.
func agentsOf(secrets []string) []int {
	var out []int
	for _, pid := range procs() {
		stat := procFile(pid, "stat")
		if i := bytes.LastIndexByte(stat, ')'); i < 0 || bytes.HasPrefix(bytes.TrimSpace(stat[i+1:]), []byte("Z")) {
			continue
		}
		b := procFile(pid, "cmdline")
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// chownTree gives every file under dir, links themselves included, to
// uid.
func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	}); err != nil {
		t.Fatal(err)
	}
}

// serverUIDs are the users the sandbox tests run a server as: root, and
// nobody as well when the tests run as root.
func serverUIDs() []int {
	if os.Geteuid() == 0 {
		return []int{0, nobodyUID}
	}
	return []int{0}
}

// --agent-networks-ahead 0 makes no network ahead (the sandbox's negative
// NetworksAhead), and N makes N; the sandbox's own zero, its default, is
// what the flag's default gives.
func TestAgentNetworksAheadFlag(t *testing.T) {
	for flag, want := range map[int]int{0: -1, 1: 1, sandbox.DefaultNetworksAhead: sandbox.DefaultNetworksAhead, 5: 5} {
		if got := networksAhead(flag); got != want {
			t.Errorf("--agent-networks-ahead %d: NetworksAhead %d, want %d", flag, got, want)
		}
	}
}
