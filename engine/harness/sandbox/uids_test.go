package sandbox

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestParseStatus: a status file's UIDs are its Uid line's four numbers,
// a zombie is told by its State line, and a status without a readable Uid
// line is an error rather than a process owned by no one.
func TestParseStatus(t *testing.T) {
	live := "Name:\tsh\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t7\nNgid:\t0\nPid:\t7\nPPid:\t1\nTracerPid:\t0\n" +
		"Uid:\t1000\t1001\t1002\t1003\nGid:\t5\t5\t5\t5\nGroups:\t5 6 7\n"
	uids, zombie, err := parseStatus([]byte(live))
	if err != nil || zombie || !slices.Equal(uids, []uint32{1000, 1001, 1002, 1003}) {
		t.Fatalf("live: %v %v %v", uids, zombie, err)
	}
	dead := "Name:\tsh\nState:\tZ (zombie)\nUid:\t1000\t1000\t1000\t1000\n"
	if _, zombie, err := parseStatus([]byte(dead)); err != nil || !zombie {
		t.Fatalf("zombie: %v %v", zombie, err)
	}
	for _, bad := range []string{"Name:\tsh\nState:\tS\n", "Uid:\t\n", "Uid:\t12x\t0\t0\t0\n", ""} {
		if uids, _, err := parseStatus([]byte(bad)); err == nil {
			t.Errorf("%q: %v, want an error", bad, uids)
		}
	}
}

// TestScanSeesEveryLiveProcessOfAUID: a scan finds this process under its
// own UID, and a child running under another UID until it dies, and not
// once it is a zombie.
func TestScanSeesEveryLiveProcessOfAUID(t *testing.T) {
	self, err := processesOf(uint32(os.Getuid()))
	if err != nil || !slices.Contains(self, os.Getpid()) {
		t.Fatalf("own process not found: %v %v", self, err)
	}
	if os.Geteuid() != 0 {
		t.Skip("running a child under another UID needs root")
	}
	// Below DefaultUIDs: no lease of a server on this host hands it out.
	const uid = 2099999917
	child := exec.Command("sleep", "600")
	child.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	pids, err := processesOf(uid)
	if err != nil || !slices.Equal(pids, []int{child.Process.Pid}) {
		t.Fatalf("processes of %d: %v %v, want [%d]", uid, pids, err, child.Process.Pid)
	}
	busy, err := processUIDs()
	if err != nil || !busy[uid] || !busy[uint32(os.Getuid())] {
		t.Fatalf("UIDs in use: %d %v, own %v, err %v", uid, busy[uid], busy[uint32(os.Getuid())], err)
	}
	// Killed and not yet waited for, the child is a zombie: its UID may
	// be leased again.
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// waitid with WNOWAIT returns once the child has died and leaves it
	// unreaped.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, child.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if pids, err := processesOf(uid); err != nil || len(pids) != 0 {
		t.Fatalf("a zombie's UID counted as in use: %v %v", pids, err)
	}
}

// BenchmarkProcScan is one scan of /proc for the UIDs in use, as a lease
// makes: "head" reads each status file's start once (eachProcess);
// "lines", the baseline, opens each with os.Open and reads it to its end
// line by line, as this package did before.
func BenchmarkProcScan(b *testing.B) {
	b.Run("head", func(b *testing.B) {
		for b.Loop() {
			if _, err := processUIDs(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lines", func(b *testing.B) {
		for b.Loop() {
			ents, err := os.ReadDir("/proc")
			if err != nil {
				b.Fatal(err)
			}
			busy := map[uint32]bool{}
			for _, e := range ents {
				if _, err := strconv.Atoi(e.Name()); err != nil {
					continue
				}
				f, err := os.Open("/proc/" + e.Name() + "/status")
				if err != nil {
					continue
				}
				sc := bufio.NewScanner(f)
				for sc.Scan() {
					if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
						for _, u := range strings.Fields(rest) {
							n, _ := strconv.ParseUint(u, 10, 32)
							busy[uint32(n)] = true
						}
					}
				}
				f.Close()
			}
		}
	})
}
