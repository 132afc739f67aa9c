package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Group identifies the process group an external program ran in (its
// leader is the program), so that a later server on the same host can
// kill what is left of it after this one died without cleaning up.
type Group struct {
	PGID int `json:"pgid"`
	// Start is the leader's start time, in clock ticks after boot: with
	// Boot it tells the group apart from a later one that reuses its id.
	Start uint64 `json:"start"`
	// Boot is the host's boot id when the group started.
	Boot string `json:"boot"`
}

// procRoot is where the process table is read (a variable for tests).
var procRoot = "/proc"

// bootID is this host's boot id: it changes at every boot and differs
// between hosts.
func bootID() (string, error) {
	b, err := os.ReadFile(procRoot + "/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", errors.New("worker: empty boot id")
	}
	return id, nil
}

// procStat is what a process's stat line says about it.
type procStat struct {
	state byte
	pgrp  int
	start uint64
}

// readStat parses /proc/<pid>/stat. The command name is in parentheses
// and may contain anything, so the fields are counted after its last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("worker: malformed stat of pid %d", pid)
	}
	// Fields from the state on: state ppid pgrp session tty_nr tpgid
	// flags minflt cminflt majflt cmajflt utime stime cutime cstime
	// priority nice num_threads itrealvalue starttime.
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("worker: malformed stat of pid %d", pid)
	}
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, fmt.Errorf("worker: malformed stat of pid %d", pid)
	}
	return procStat{state: f[0][0], pgrp: pgrp, start: start}, nil
}

// ProbeGroup describes the process group whose leader is pid, which must
// be running.
func ProbeGroup(pid int) (Group, error) {
	boot, err := bootID()
	if err != nil {
		return Group{}, err
	}
	st, err := readStat(pid)
	if err != nil {
		return Group{}, err
	}
	return Group{PGID: pid, Start: st.start, Boot: boot}, nil
}

// members lists the live processes of g: those in process group g.PGID
// that started no earlier than its leader (zombies are dead already).
// reused reports that the pid g.PGID names a process that started at
// another time than g's leader, so the group id now belongs to someone
// else.
func (g Group) members() (pids []int, reused bool, err error) {
	if st, err := readStat(g.PGID); err == nil && st.start != g.Start {
		return nil, true, nil
	}
	dir, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, false, err
	}
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.pgrp != g.PGID || st.state == 'Z' || st.state == 'X' || st.start < g.Start {
			continue
		}
		pids = append(pids, pid)
	}
	return pids, false, nil
}

// killPoll is how often KillLeft looks whether the killed processes are
// gone: the kernel tells no one but their parent.
const killPoll = 10 * time.Millisecond

// KillLeft kills every live process of g with SIGKILL and waits until
// they are gone (or ctx is done), and returns how many it found. It kills
// nothing when g was recorded under another boot id (another host, or
// before a reboot), nor when g's leader pid now names a process that
// started at another time (the id was reused). A process group id is
// reused only after every process of the group is gone, so while any of
// them lives the id is still g's.
func (g Group) KillLeft(ctx context.Context) (int, error) {
	boot, err := bootID()
	if err != nil || g.PGID <= 1 || g.Boot != boot {
		return 0, err
	}
	pids, reused, err := g.members()
	if err != nil || reused || len(pids) == 0 {
		return 0, err
	}
	found := len(pids)
	for {
		if err := syscall.Kill(-g.PGID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return found, fmt.Errorf("worker: kill process group %d: %w", g.PGID, err)
		}
		t := time.NewTimer(killPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return found, fmt.Errorf("worker: process group %d still has processes: %w", g.PGID, ctx.Err())
		case <-t.C:
		}
		if pids, reused, err = g.members(); err != nil || reused || len(pids) == 0 {
			return found, err
		}
	}
}
