package sandbox

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// agentName is the user and group name of an agent's UID inside its
// sandbox.
const agentName = "oecp-agent"

// Spec is one agent execution to confine.
type Spec struct {
	// Run keys the writer identity: every writer execution of a run runs
	// under the same leased UID, until CloseRun.
	Run string
	// Workspace is the run's workspace, the processes' working directory.
	Workspace string
	// GitDir is the run's git directory outside the workspace ("" none).
	GitDir string
	// Objects is the object directory GitDir borrows from ("" none): the
	// repository's mirror, shown read-only so that git works in the
	// workspace; nothing else of the mirror is shown.
	Objects string
	// Home is the session's private home ("" none).
	Home string
	// Verifier executions see the workspace and git directory read-only,
	// under a UID of their own.
	Verifier bool
}

// Execution confines the processes of one agent execution. A nil
// *Execution confines nothing.
type Execution struct {
	h     *Host
	spec  Spec
	uid   int // -1: the server's own
	lease *lease
	net   *runNetwork // the run's namespace it enters (nil: one of its own per sandbox)
	etc   []etcFile   // the sandbox's passwd, group and git configuration
	cg    *group
	// diskStop ends the --agent-max-disk watch, which closes diskDone.
	diskStop, diskDone chan struct{}

	mu    sync.Mutex
	inits map[int]bool
	limit string
}

// Start prepares an execution: its identity (a leased UID owning its
// home, and for a writer the workspace and git directory), its generated
// files and its limits. Close ends it.
func (h *Host) Start(spec Spec) (*Execution, error) {
	if h == nil {
		return nil, nil
	}
	e := &Execution{h: h, spec: spec, uid: -1, inits: map[int]bool{}}
	if h.cfg.Unconfined {
		return e, nil
	}
	// Mounts go where the paths really are, as the hidden paths do.
	for _, p := range []*string{&e.spec.Workspace, &e.spec.GitDir, &e.spec.Home} {
		if real, err := filepath.EvalSymlinks(*p); *p != "" && err == nil {
			*p = real
		}
	}
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()
	if h.root {
		h.awaitPrepared(spec.Run) // the run's writer UID may be being leased
		if err := e.identity(); err != nil {
			return nil, err
		}
	}
	e.etc = e.etcFiles()
	if h.cg != nil {
		g, err := h.cg.create()
		if err != nil {
			return nil, fmt.Errorf("sandbox limits: %w", err)
		}
		e.cg = g
		if err := g.watch(e.hitLimit); err != nil {
			return nil, fmt.Errorf("sandbox limits: %w", err)
		}
	}
	if h.root {
		n, err := h.takeNetwork(spec.Run)
		if err != nil {
			return nil, fmt.Errorf("sandbox network: %w", err)
		}
		e.net = n
	}
	if h.cfg.MaxDisk > 0 {
		e.watchDisk()
	}
	ok = true
	return e, nil
}

// identity leases the execution's UID and gives it what it owns: the
// workspace and git directory always belong to the run's writer (even
// when a verifier runs first), a verifier gets a UID of its own.
func (e *Execution) identity() error {
	w, err := e.h.writer(e.spec.Run)
	if err != nil {
		return err
	}
	e.uid = int(w.uid)
	for _, d := range []string{e.spec.Workspace, e.spec.GitDir} {
		if err := chownTree(d, e.uid); err != nil {
			return fmt.Errorf("giving the run's writer its workspace: %w", err)
		}
	}
	if e.spec.Workspace != "" {
		if err := os.Chmod(e.spec.Workspace, 0o755); err != nil {
			return err
		}
	}
	if e.spec.Verifier {
		l, err := e.h.leases.acquire()
		if err != nil {
			return err
		}
		e.lease, e.uid = l, int(l.uid)
	}
	if e.spec.Home != "" {
		if err := chownTree(e.spec.Home, e.uid); err != nil {
			return fmt.Errorf("giving the session its home: %w", err)
		}
		return os.Chmod(e.spec.Home, 0o700)
	}
	return nil
}

// writer returns the run's writer lease, leasing one on first use.
func (h *Host) writer(run string) (*lease, error) {
	h.mu.Lock()
	l, ok := h.writers[run]
	h.mu.Unlock()
	if ok {
		return l, nil
	}
	// Leasing scans /proc: h.mu is not held across it. Of two executions
	// of the run leasing at once, the first to record its lease wins; the
	// other gives its UID back (it ran nothing).
	l, err := h.leases.acquire()
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	won, ok := h.writers[run]
	if !ok {
		h.writers[run], won = l, l
	}
	h.mu.Unlock()
	if won != l {
		if err := l.release(); err != nil {
			h.log.Error("sandbox: giving back a spare writer UID", "uid", l.uid, "err", err)
		}
	}
	return won, nil
}

// CloseRun ends a finished run's writer identity: every process of its
// UID is killed and the UID may be leased again. Where runs get network
// namespaces of their own, it tops up the namespaces made ahead.
func (h *Host) CloseRun(run string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	l, ok := h.writers[run]
	delete(h.writers, run)
	h.mu.Unlock()
	h.closeNetworks(run)
	if ok {
		if err := l.release(); err != nil {
			h.log.Error("sandbox: releasing a run's writer UID", "uid", l.uid, "err", err)
		}
	}
	h.makeSpareNetworks()
}

// chownTree gives every file of the tree at dir (not following links) to
// uid, changing only those another owns.
func chownTree(dir string, uid int) error {
	if dir == "" {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == uid {
			return nil
		}
		return os.Lchown(path, uid, uid)
	})
}

// etcFile is a file bwrap writes into the sandbox's own file system,
// read-only, from a pipe: a sandbox's generated files cost the host's
// disk no inode. A host file system that passes over recently freed
// inodes for each new one would otherwise slow every checkout after each
// execution's clean-up.
type etcFile struct{ path, body string }

// etcFiles are the sandbox's passwd, group and system git configuration.
func (e *Execution) etcFiles() []etcFile {
	uid := e.uid
	if uid < 0 {
		uid = os.Getuid()
	}
	home := e.spec.Home
	if home == "" {
		home = "/tmp"
	}
	id := strconv.Itoa(uid)
	passwd := "root:x:0:0:root:/root:/usr/sbin/nologin\n"
	group := "root:x:0:\n"
	if uid != 0 {
		passwd += agentName + ":x:" + id + ":" + id + ":oecp agent:" + home + ":/bin/sh\n"
		group += agentName + ":x:" + id + ":\n"
	}
	passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group += "nogroup:x:65534:\n"
	// The workspace and git directory belong to the writer; a verifier's
	// git must still read them.
	gitconfig := "[safe]\n\tdirectory = *\n"
	return []etcFile{{"/etc/passwd", passwd}, {"/etc/group", group}, {"/etc/gitconfig", gitconfig}}
}

// Close ends the execution: the disk watch stops, a verifier's UID is
// released (every process of it killed), the limits' groups are removed.
func (e *Execution) Close() {
	if e == nil {
		return
	}
	e.stopDisk()
	e.h.giveBack(e.spec.Run, e.net)
	if e.lease != nil {
		if err := e.lease.release(); err != nil {
			e.h.log.Error("sandbox: releasing a verifier UID", "uid", e.lease.uid, "err", err)
		}
	}
	if e.cg != nil {
		if err := e.cg.remove(); err != nil {
			e.h.log.Error("sandbox: removing an execution's cgroups", "err", err)
		}
	}
}

// Limit names the limit the execution hit (LimitProcs, LimitMemory,
// LimitDisk), or "".
func (e *Execution) Limit() string {
	if e == nil {
		return ""
	}
	e.mu.Lock()
	limit := e.limit
	e.mu.Unlock()
	if limit == "" && e.cg != nil {
		limit = e.cg.hit()
	}
	return limit
}

// hitLimit ends every sandbox of the execution.
func (e *Execution) hitLimit(limit string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.limit == "" {
		e.limit = limit
	}
	for pid := range e.inits {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// Confine makes cmd, not yet started, run in the execution's sandbox:
// cmd is started with the returned start (never with cmd.Start), and the
// returned cleanup, called once cmd has ended and its process group was
// killed, releases what the sandbox held; once it has returned, no thread
// of the server is in the run's network namespace. Whatever Confine does, cmd's
// process gets SIGKILL when the server dies.
func (e *Execution) Confine(cmd *exec.Cmd) (start func() error, cleanup func(), err error) {
	pdeathsig(cmd)
	if e == nil || e.h.cfg.Unconfined {
		return cmd.Start, func() {}, nil
	}
	if cmd.Err != nil {
		return nil, nil, cmd.Err
	}
	if filepath.IsAbs(cmd.Path) {
		if why := e.h.hiddenBy(cmd.Path, []string{e.spec.Workspace, e.spec.GitDir, e.spec.Home}); why != "" {
			return nil, nil, fmt.Errorf("%w: %s (%s)", ErrNotFound, cmd.Path, why)
		}
	}
	gated := len(gateProgram) > 0
	n := 3
	if gated {
		n = 4
	}
	pipes, err := newPipes(n + len(e.etc))
	if err != nil {
		return nil, nil, err
	}
	infoR, infoW := pipes[0].r, pipes[0].w
	blockR, blockW := pipes[1].r, pipes[1].w
	gateR, gateW := pipes[2].r, pipes[2].w
	fail := func(err error) (func() error, func(), error) {
		for _, p := range pipes {
			p.close()
		}
		return nil, nil, err
	}
	fd := 3 + len(cmd.ExtraFiles)
	if !gated && fd+2 > maxGateFd {
		return fail(fmt.Errorf("sandbox: %d inherited files leave no descriptor for the start gate", len(cmd.ExtraFiles)))
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, infoW, blockR, gateR)
	// What bwrap copies into the sandbox (the gate, the files of e.etc)
	// comes through a pipe of its own, written whole and closed here: each
	// fits the pipe's buffer (at least a page), so no write waits for
	// bwrap. feed returns the descriptor bwrap reads it from.
	var fed []*os.File
	feed := func(p pipe, data []byte) (int, error) {
		_, err := p.w.Write(data)
		p.w.Close()
		if err != nil {
			return -1, err
		}
		fed = append(fed, p.r)
		cmd.ExtraFiles = append(cmd.ExtraFiles, p.r)
		return 2 + len(cmd.ExtraFiles), nil
	}
	progFd := -1
	if gated {
		if progFd, err = feed(pipes[3], gateProgram); err != nil {
			return fail(fmt.Errorf("sandbox: writing the start gate: %w", err))
		}
	}
	etcFds := make([]int, len(e.etc))
	for i, f := range e.etc {
		if etcFds[i], err = feed(pipes[n+i], []byte(f.body)); err != nil {
			return fail(fmt.Errorf("sandbox: writing %s: %w", f.path, err))
		}
	}
	dir := cmd.Dir
	if dir == "" {
		dir = e.spec.Workspace
	}
	// A link on the way may be inside a hidden directory.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	args := e.args(dir, fd, fd+1, fd+2, progFd, etcFds)
	args = append(args, cmd.Path)
	cmd.Args = append(append([]string{programBwrap}, args...), cmd.Args[1:]...)
	cmd.Path = e.h.bwrap
	start = cmd.Start
	released := make(chan struct{})
	// The thread that started cmd in the run's namespace, gone from it
	// once closed. start and cleanup are called in that order, by one
	// goroutine or in an order the caller makes.
	var left <-chan struct{}
	if e.net != nil {
		ns := e.net.ns
		start = func() (err error) {
			left, err = startInNetwork(cmd, ns, released)
			return err
		}
	}
	var net *network
	done := make(chan struct{})
	go func() {
		defer close(done)
		net = e.setup(infoR, blockW, gateW)
	}()
	return start, func() {
		close(released)
		if left != nil {
			<-left
		}
		infoW.Close()
		blockR.Close()
		gateR.Close()
		infoR.Close()
		for _, r := range fed {
			r.Close()
		}
		<-done
		net.stop()
	}, nil
}

// startInNetwork starts cmd from an OS thread that has entered the
// network namespace ns (onNetworkThread), so that cmd's process starts in
// it, and returns a channel closed once that thread has left ns. The
// thread serves no other goroutine until released is closed (or the start
// failed): a process's parent-death signal comes when the thread that
// started it ends, and a thread the runtime pools may be ended by any
// goroutine that locks it and returns locked, so the process keeps its
// thread to itself; released must not be closed before cmd's process has
// ended.
func startInNetwork(cmd *exec.Cmd, ns *os.File, released <-chan struct{}) (left <-chan struct{}, err error) {
	started := make(chan error, 1)
	left = onNetworkThread(func() error {
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("sandbox: entering the run's network namespace: %w", err)
		}
		return nil
	}, func(entered error) {
		if entered != nil {
			started <- entered
			return
		}
		err := cmd.Start()
		started <- err
		if err == nil {
			<-released
		}
	})
	return left, <-started
}

// maxGateFd is the highest descriptor the shell's start gate (where
// oecp-gate is not built) may read: its redirections take one digit.
const maxGateFd = 9

// gatePath is where a sandbox holds oecp-gate (gateProgram), on its own
// /run; the server's copy is never a file.
const gatePath = "/run/" + gateArg0

// gateScript, where oecp-gate is not built, runs the program ("$@") only
// once the host has written "go" on the descriptor it names, and closes
// that descriptor first; setpriv then takes the agent's identity. oecp-gate
// does the same in one exec. bwrap's own block descriptor lets
// the sandbox go on when it reaches end of file, which is what a host that
// died during setup leaves behind (and by then the sandbox's init no
// longer dies with its parent): the gate turns that into an exit before
// anything of the agent's runs.
const gateScript = `IFS= read -r go <&%[1]d && [ "$go" = go ] || exit 125; exec %[1]d<&-; exec "$@"`

// pipe is one os.Pipe.
type pipe struct{ r, w *os.File }

func (p pipe) close() {
	p.r.Close()
	p.w.Close()
}

// newPipes makes n pipes, or none.
func newPipes(n int) ([]pipe, error) {
	out := make([]pipe, 0, n)
	for range n {
		r, w, err := os.Pipe()
		if err != nil {
			for _, p := range out {
				p.close()
			}
			return nil, err
		}
		out = append(out, pipe{r, w})
	}
	return out, nil
}

// setup waits for the sandbox's namespaces, puts its init in the
// execution's groups, connects its network, then lets it run the
// program. On any failure the sandbox is killed before it runs anything.
func (e *Execution) setup(info, block, gate *os.File) *network {
	defer block.Close()
	defer gate.Close()
	var msg struct {
		Pid int `json:"child-pid"`
	}
	if err := json.NewDecoder(info).Decode(&msg); err != nil || msg.Pid <= 0 {
		return nil // bwrap failed, or the process never started
	}
	fail := func(what string, err error) *network {
		e.h.log.Error("sandbox: "+what, "err", err)
		_ = syscall.Kill(msg.Pid, syscall.SIGKILL)
		return nil
	}
	e.mu.Lock()
	e.inits[msg.Pid] = true
	hit := e.limit != ""
	e.mu.Unlock()
	if hit {
		return fail("a limit was already hit", fmt.Errorf("%s", e.limit))
	}
	setupStage("limits", msg.Pid)
	if e.cg != nil {
		if err := e.cg.add(msg.Pid); err != nil {
			return fail("applying limits", err)
		}
	}
	setupStage("network", msg.Pid)
	var net *network
	if e.net == nil {
		var err error
		if net, err = e.h.connectPid(msg.Pid); err != nil {
			return fail("connecting the network", err)
		}
	}
	setupStage("unblock", msg.Pid)
	if _, err := block.Write([]byte{'1'}); err != nil {
		net.stop()
		return nil
	}
	setupStage("gate", msg.Pid)
	if _, err := gate.Write([]byte("go\n")); err != nil {
		net.stop()
		return nil
	}
	return net
}

// setupStage is called as setup reaches each stage with the sandbox's
// init; only tests set it, to stop a host at that point.
var setupStage = func(stage string, pid int) {}

// args are bwrap's arguments up to the program; progFd, unless -1, is
// the descriptor bwrap reads oecp-gate from, etcFds those it reads each
// of e.etc from.
func (e *Execution) args(dir string, infoFd, blockFd, gateFd, progFd int, etcFds []int) []string {
	a := e.h.namespaceArgs(e.net == nil)
	a = append(a, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
		"--perms", "1777", "--tmpfs", "/tmp", "--perms", "1777", "--tmpfs", "/var/tmp",
		"--perms", "1777", "--tmpfs", "/dev/shm", "--perms", "0755", "--tmpfs", "/run")
	for _, p := range e.h.hide {
		if !slices.Contains(privateDirs, p) {
			a = append(a, "--perms", "0755", "--tmpfs", p)
		}
	}
	rw := "--bind"
	if e.spec.Verifier {
		rw = "--ro-bind"
	}
	binds := [][3]string{}
	for _, p := range e.h.expose {
		binds = append(binds, [3]string{"--ro-bind", p, p})
	}
	if e.spec.Home != "" {
		binds = append(binds, [3]string{"--bind", e.spec.Home, e.spec.Home})
	}
	for _, d := range []string{e.spec.Workspace, e.spec.GitDir} {
		if _, err := os.Stat(d); d != "" && err == nil {
			binds = append(binds, [3]string{rw, d, d})
		}
	}
	if _, err := os.Stat(e.spec.Objects); e.spec.Objects != "" && err == nil {
		binds = append(binds, [3]string{"--ro-bind", e.spec.Objects, e.spec.Objects})
	}
	made := map[string]bool{}
	for _, b := range binds {
		// The directories leading to a mount point inside a hidden
		// directory are made searchable, as the host's would be.
		for _, d := range e.h.ancestorsInHidden(b[2]) {
			if !made[d] {
				made[d] = true
				a = append(a, "--perms", "0755", "--dir", d)
			}
		}
		a = append(a, b[:]...)
	}
	// Hidden files last: one inside a directory shown above stays hidden.
	for _, f := range e.h.files {
		a = append(a, "--ro-bind", "/dev/null", f)
	}
	for i, f := range e.etc {
		a = append(a, "--perms", "0444", "--ro-bind-data", strconv.Itoa(etcFds[i]), f.path)
	}
	a = append(a, "--chdir", dir, "--info-fd", strconv.Itoa(infoFd), "--block-fd", strconv.Itoa(blockFd))
	if progFd >= 0 {
		// Readable and executable by its owner alone: the user the
		// sandbox's init runs the gate as (root, for a root server).
		id := "-"
		if e.uid >= 0 {
			id = strconv.Itoa(e.uid)
		}
		return append(a, "--perms", "0500", "--file", strconv.Itoa(progFd), gatePath,
			"--", gatePath, strconv.Itoa(gateFd), id)
	}
	a = append(a, "--", "/bin/sh", "-c", fmt.Sprintf(gateScript, gateFd), gateArg0)
	if e.uid >= 0 {
		id := strconv.Itoa(e.uid)
		a = append(a, e.h.setpriv, "--reuid="+id, "--regid="+id, "--clear-groups",
			"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--")
	}
	return a
}
