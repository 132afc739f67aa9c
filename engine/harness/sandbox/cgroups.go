package sandbox

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupRoot is where the cgroup v1 controller hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// limitPollInterval is how often an execution's process count is checked
// against its bound.
const limitPollInterval = 100 * time.Millisecond

// Removing an execution's group after its processes were killed: a try
// that finds the group still busy kills what is left in it and pauses,
// removeFirstPause first, each pause twice the last up to removeMaxPause,
// until removeWait has passed; the group is then left, and reported.
const (
	removeFirstPause = time.Millisecond
	removeMaxPause   = 100 * time.Millisecond
	removeWait       = 10 * time.Second
)

// cgroups creates the execution groups of the pids and memory
// controllers beneath the server's own groups, so an execution never
// escapes a limit the host put on the server.
type cgroups struct {
	maxProcs  int64
	maxMemory int64
	pids      string // the server's pids group ("" without a bound)
	memory    string // the server's memory group ("" without a bound)
	// nonce tells this server's groups from those of an earlier process
	// of the same pid (pids are reused) that left its groups behind.
	nonce string
	seq   atomic.Uint64
}

// deadGroupAge is how old a dead server's group must be to be removed.
const deadGroupAge = time.Minute

// groupPrefix begins the name of every execution group.
const groupPrefix = "oecp-agent-"

func newCgroups(maxProcs, maxMemory int64) (*cgroups, error) {
	own, err := ownGroups()
	if err != nil {
		return nil, err
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	c := &cgroups{maxProcs: maxProcs, maxMemory: maxMemory, nonce: hex.EncodeToString(b[:])}
	if maxProcs > 0 {
		if c.pids, err = controllerDir(own, "pids"); err != nil {
			return nil, err
		}
	}
	if maxMemory > 0 {
		if c.memory, err = controllerDir(own, "memory"); err != nil {
			return nil, err
		}
	}
	for _, dir := range []string{c.pids, c.memory} {
		removeDeadServersGroups(dir)
	}
	g, err := c.create()
	if err != nil {
		return nil, fmt.Errorf("cannot create a cgroup beneath the server's: %w", err)
	}
	_ = g.remove() // the probe's empty group; one left behind limits nothing
	return c, nil
}

// ownGroups maps each cgroup v1 controller to the server's group path.
func ownGroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			if ctrl != "" {
				out[ctrl] = parts[2]
			}
		}
	}
	return out, sc.Err()
}

func controllerDir(own map[string]string, ctrl string) (string, error) {
	path, ok := own[ctrl]
	if !ok {
		return "", fmt.Errorf("no cgroup v1 %s controller", ctrl)
	}
	dir := filepath.Join(cgroupRoot, ctrl, path)
	if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
		return "", fmt.Errorf("the %s controller is not mounted at %s: %w", ctrl, filepath.Join(cgroupRoot, ctrl), err)
	}
	return dir, nil
}

// group is one execution's groups.
type group struct {
	dirs []string
	pids string
	mem  string

	mu      sync.Mutex
	closers []*os.File
	stops   []chan struct{}
}

func (c *cgroups) create() (*group, error) {
	name := fmt.Sprintf("%s%d-%s-%d", groupPrefix, os.Getpid(), c.nonce, c.seq.Add(1))
	g := &group{}
	if c.pids != "" {
		g.pids = filepath.Join(c.pids, name)
		if err := mkgroup(g.pids, "pids.max", c.maxProcs); err != nil {
			return nil, err
		}
		g.dirs = append(g.dirs, g.pids)
	}
	if c.memory != "" {
		g.mem = filepath.Join(c.memory, name)
		if err := mkgroup(g.mem, "memory.limit_in_bytes", c.maxMemory); err != nil {
			_ = g.remove()
			return nil, err
		}
		g.dirs = append(g.dirs, g.mem)
		// Without swap accounting the file is absent; memory alone bounds.
		_ = os.WriteFile(filepath.Join(g.mem, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(c.maxMemory, 10)), 0)
	}
	return g, nil
}

// removeDeadServersGroups removes the execution groups beneath dir that a
// server no longer running left behind (killed, or its removal gave up):
// a group named for a pid with no process, made over a minute ago. A group
// still holding processes is not removed (rmdir refuses it); the age
// spares the fresh, still empty group of a live server this one cannot
// see (one in another PID namespace sharing the hierarchy).
func removeDeadServersGroups(dir string) {
	if dir == "" {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), groupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < deadGroupAge {
			continue
		}
		_ = os.Remove(filepath.Join(dir, e.Name()))
	}
}

func mkgroup(dir, file string, limit int64) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		_ = os.Remove(dir)
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// add moves a process into the groups; its later children stay there.
func (g *group) add(pid int) error {
	for _, d := range g.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("joining %s: %w", d, err)
		}
	}
	return nil
}

// watch calls hit with the limit's name, at most once, as soon as the
// execution reaches its process bound or the kernel's OOM killer acts
// on its memory bound.
func (g *group) watch(hit func(limit string)) error {
	var once sync.Once
	report := func(limit string) { once.Do(func() { hit(limit) }) }
	if g.pids != "" {
		if err := g.watchPids(report); err != nil {
			return err
		}
	}
	if g.mem != "" {
		if err := g.watchOOM(report); err != nil {
			return err
		}
	}
	return nil
}

// watchPids checks pids.events every limitPollInterval: cgroup v1 counts
// each fork refused at pids.max there but does not notify it.
func (g *group) watchPids(hit func(string)) error {
	events := filepath.Join(g.pids, "pids.events")
	if _, err := os.Stat(events); err != nil {
		return fmt.Errorf("pids events: %w", err)
	}
	stop := make(chan struct{})
	g.mu.Lock()
	g.stops = append(g.stops, stop)
	g.mu.Unlock()
	go func() {
		t := time.NewTicker(limitPollInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if counter(events, "max") > 0 {
					hit(LimitProcs)
					return
				}
			}
		}
	}()
	return nil
}

// watchOOM registers an eventfd for the memory group's OOM notifications.
func (g *group) watchOOM(hit func(string)) error {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	ev := os.NewFile(uintptr(efd), "eventfd")
	ctl, err := os.Open(filepath.Join(g.mem, "memory.oom_control"))
	if err != nil {
		ev.Close()
		return err
	}
	g.keep(ev)
	g.keep(ctl)
	reg := fmt.Sprintf("%d %d", efd, ctl.Fd())
	if err := os.WriteFile(filepath.Join(g.mem, "cgroup.event_control"), []byte(reg), 0); err != nil {
		return fmt.Errorf("OOM notification: %w", err)
	}
	go func() {
		buf := make([]byte, 8)
		if _, err := ev.Read(buf); err == nil {
			hit(LimitMemory)
		}
	}()
	return nil
}

func (g *group) keep(f *os.File) {
	g.mu.Lock()
	g.closers = append(g.closers, f)
	g.mu.Unlock()
}

// hit names the limit the execution reached, or "".
func (g *group) hit() string {
	if g.pids != "" && counter(filepath.Join(g.pids, "pids.events"), "max") > 0 {
		return LimitProcs
	}
	if g.mem != "" && (counter(filepath.Join(g.mem, "memory.oom_control"), "oom_kill") > 0 || counter(filepath.Join(g.mem, "memory.oom_control"), "under_oom") > 0) {
		return LimitMemory
	}
	return ""
}

// counter reads "name N" from a cgroup key-value file (0 when absent).
func counter(file, name string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == name {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// remove stops the watches, kills whatever is left in the groups and
// removes them; the error names a group that stayed.
func (g *group) remove() error {
	g.mu.Lock()
	closers, stops := g.closers, g.stops
	g.closers, g.stops = nil, nil
	g.mu.Unlock()
	for _, f := range closers {
		f.Close()
	}
	for _, c := range stops {
		close(c)
	}
	var errs []error
	for _, d := range g.dirs {
		errs = append(errs, removeGroupDir(d, os.Remove, killProcs))
	}
	return errors.Join(errs...)
}

// removeGroupDir removes dir with remove, killing what is left in it
// (kill) and pausing between tries, for at most removeWait.
func removeGroupDir(dir string, remove func(string) error, kill func(string)) error {
	deadline := time.Now().Add(removeWait)
	pause := removeFirstPause
	for {
		err := remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("cgroup %s not removed: %w", dir, err)
		}
		kill(dir)
		time.Sleep(pause)
		pause = min(2*pause, removeMaxPause)
	}
}

func killProcs(dir string) {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
