package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCgroupsOfDeadServersGoAndNeverCollide: a group an earlier process of
// this very pid left behind (pids are reused) does not stop this server
// from making its groups, and the groups a dead server left are removed
// when a server starts; a live server's groups stay.
func TestCgroupsOfDeadServersGoAndNeverCollide(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups are made by a root server")
	}
	own, err := ownGroups()
	if err != nil {
		t.Skipf("no cgroups: %v", err)
	}
	pids, err := controllerDir(own, "pids")
	if err != nil {
		t.Skipf("no pids controller: %v", err)
	}
	// A pid above the kernel's pid_max never names a live process.
	max, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	deadPid, err := strconv.Atoi(strings.TrimSpace(string(max)))
	if err != nil {
		t.Fatal(err)
	}
	leftByDead := filepath.Join(pids, groupPrefix+strconv.Itoa(deadPid+1)+"-1")
	// What an earlier process of this pid would have named its first group.
	leftBySamePid := filepath.Join(pids, groupPrefix+strconv.Itoa(os.Getpid())+"-1")
	for _, d := range []string{leftByDead, leftBySamePid} {
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			t.Skipf("cannot make a group: %v", err)
		}
	}
	t.Cleanup(func() { _ = os.Remove(leftBySamePid); _ = os.Remove(leftByDead) })
	old := time.Now().Add(-2 * deadGroupAge)
	if err := os.Chtimes(leftByDead, old, old); err != nil {
		t.Skipf("cannot age a group: %v", err)
	}

	c, err := newCgroups(64, 0)
	if err != nil {
		t.Fatalf("a group left by an earlier process of this pid stopped the server: %v", err)
	}
	g, err := c.create()
	if err != nil {
		t.Fatalf("creating an execution's group: %v", err)
	}
	defer g.remove()
	if _, err := os.Stat(leftByDead); !os.IsNotExist(err) {
		t.Errorf("the group of a dead server is still there (%v)", err)
	}
	if _, err := os.Stat(leftBySamePid); err != nil {
		t.Errorf("the group named for this live pid was removed: %v", err)
	}
}
