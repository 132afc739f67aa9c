package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// gateArg0 is the name the start gate runs under; it marks a process's
// command line as one of this package's sandboxes.
const gateArg0 = "oecp-gate"

// SweepOrphans kills every sandbox on this host whose server died: the
// init of a sandbox (the inner bwrap, PID 1 of the sandbox's PID
// namespace, whose command line carries the start gate) whose parent is no
// longer bwrap, in this sweep and the one before. Such an init was
// orphaned during setup, when it does not yet die with its parent;
// killing it ends every process of the sandbox. A running sandbox always
// has its bwrap parent; one that is ending may outlive its parent for a
// moment, which the second sighting leaves it to finish. It returns how
// many it killed.
func (h *Host) SweepOrphans() int {
	if h == nil || h.cfg.Unconfined {
		return 0
	}
	seen := map[int]string{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !isSandboxInit(pid) {
			continue
		}
		ppid, _, start, ok := stat(pid)
		if !ok {
			continue
		}
		// The parent's name, not its command line: an exiting process
		// shows an empty command line, and its sandbox is ending anyway.
		if _, comm, _, ok := stat(ppid); ok && comm == programBwrap {
			continue
		}
		seen[pid] = start
	}
	h.orphanMu.Lock()
	before := h.orphans
	h.orphans = seen
	h.orphanMu.Unlock()
	killed := 0
	for pid, start := range seen {
		if before[pid] != start {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
			h.log.Warn("sandbox: killed a sandbox whose server died during its setup", "pid", pid)
		}
	}
	return killed
}

// SweepEvery runs SweepOrphans now and every d until ctx ends.
func (h *Host) SweepEvery(ctx context.Context, d time.Duration) {
	if h == nil || h.cfg.Unconfined {
		return
	}
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		h.SweepOrphans()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// isSandboxInit reports whether pid is the init of one of our sandboxes:
// our bwrap, and PID 1 of a namespace below the one /proc shows.
func isSandboxInit(pid int) bool {
	if !isOurBwrap(pid) {
		return false
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			return len(f) >= 2 && f[len(f)-1] == "1"
		}
	}
	return false
}

// isOurBwrap reports whether pid runs bwrap with the start gate (oecp-gate
// at gatePath, or the shell named gateArg0 of a sandbox without it).
func isOurBwrap(pid int) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := bytes.Split(bytes.TrimSuffix(cmdline, []byte{0}), []byte{0})
	if len(args) == 0 || filepath.Base(string(args[0])) != programBwrap {
		return false
	}
	for _, a := range args {
		if string(a) == gateArg0 || string(a) == gatePath {
			return true
		}
	}
	return false
}

// stat is pid's parent, name and start time (in clock ticks since boot,
// as text), from /proc/PID/stat; ok is false for a process that is gone or
// a zombie.
func stat(pid int) (ppid int, comm, start string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", "", false
	}
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return 0, "", "", false
	}
	// After the name: state, ppid, ... starttime is the 20th field.
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 20 || f[0] == "Z" {
		return 0, "", "", false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, string(b[open+1 : end]), f[19], err == nil
}
