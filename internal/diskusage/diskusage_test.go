package diskusage_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/oecp/oecp/internal/diskusage"
	"github.com/oecp/oecp/internal/testkit"
)

// TestDiskUsageCountsRealBlocksWithoutFollowingLinks: a measurement counts
// the blocks files really take, a file of two links once, a hole nothing,
// and never what a link points to.
func TestDiskUsageCountsRealBlocksWithoutFollowingLinks(t *testing.T) {
	const mib = 1 << 20
	ws, outside := t.TempDir(), t.TempDir()
	testkit.WriteFile(t, filepath.Join(ws, "a", "b", "data"), mib)
	if err := os.Link(filepath.Join(ws, "a", "b", "data"), filepath.Join(ws, "again")); err != nil {
		t.Fatal(err)
	}
	sparse, err := os.Create(filepath.Join(ws, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sparse.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	sparse.Close()
	testkit.WriteFile(t, filepath.Join(outside, "big"), 8*mib)
	for name, target := range map[string]string{"file-link": filepath.Join(outside, "big"), "dir-link": outside} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := diskusage.Measure([]string{ws, "", filepath.Join(ws, "missing")}, 1<<40, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The data, plus the directories' and links' own blocks.
	if n < mib || n >= 2*mib {
		t.Fatalf("measured %d bytes, want 1 MiB and a little", n)
	}
	// Over the limit, a measurement stops early with at least the limit.
	if n, err := diskusage.Measure([]string{ws}, 4096, nil); err != nil || n <= 4096 {
		t.Fatalf("over 4096: %d, %v", n, err)
	}
}

// TestDiskUsageBoundsItsWalk: a tree with more entries than a measurement
// visits, or nested deeper than it descends, is over the limit whatever
// its bytes; a closed stop ends a measurement.
func TestDiskUsageBoundsItsWalk(t *testing.T) {
	ws := t.TempDir()
	for _, name := range []string{"a", "b", "c", "d"} {
		testkit.WriteFile(t, filepath.Join(ws, name), 1)
	}
	if _, err := diskusage.MeasureAtMost([]string{ws}, 1<<40, nil, 3); !errors.Is(err, diskusage.ErrTooManyEntries) {
		t.Errorf("4 entries with a bound of 3: %v", err)
	}
	if _, err := diskusage.MeasureAtMost([]string{ws}, 1<<40, nil, 4); err != nil {
		t.Errorf("4 entries with a bound of 4: %v", err)
	}
	deep := t.TempDir()
	dir := deep
	for range diskusage.MaxDepth + 1 {
		dir = filepath.Join(dir, "d")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := diskusage.Measure([]string{deep}, 1<<40, nil); !errors.Is(err, diskusage.ErrTooDeep) {
		t.Errorf("%d levels: %v", diskusage.MaxDepth+1, err)
	}
	stop := make(chan struct{})
	close(stop)
	if _, err := diskusage.Measure([]string{ws}, 1<<40, stop); !errors.Is(err, diskusage.ErrStopped) {
		t.Errorf("stopped: %v", err)
	}
}
