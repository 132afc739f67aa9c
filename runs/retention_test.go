package runs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store/sqlite"
)

// TestCompactedCursorIsGone: once retention deleted a finished run, a
// watch or logs replay from one of its cursors is GONE naming the
// compaction watermark, while a run that never existed is NOT_FOUND; the
// run leaves the inventory and its submission key may be used again.
func TestCompactedCursorIsGone(t *testing.T) {
	r := newRig(t, nil, 0)
	ctx := as("alice")
	if _, err := r.b.Submit(ctx, "r1", oneStep("k1", "log:2")); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, r.b, ctx, "r1")
	if _, err := r.b.Submit(ctx, "young", oneStep("k2", "echo")); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, r.b, ctx, "young")
	cursor := "v2:2"
	if n, err := r.b.Compact(context.Background(), time.Now().Add(time.Hour), 1); err != nil || n != 1 {
		t.Fatalf("Compact = %d, %v; want the older run", n, err)
	}
	if _, err := r.b.Watch(ctx, "r1", &cursor); errCode(err) != protocol.Gone || !strings.Contains(details(err.(*protocol.Error)), "compactedThrough") {
		t.Fatalf("watch from a compacted cursor: %v", err)
	}
	if _, err := r.b.Logs(ctx, "r1", &cursor, nil); errCode(err) != protocol.Gone {
		t.Fatalf("logs from a compacted cursor: %v", err)
	}
	far := "v2:999999"
	for _, c := range []*string{nil, &far} {
		if _, err := r.b.Watch(ctx, "r1", c); errCode(err) != protocol.NotFound {
			t.Fatalf("watch of the deleted run from %v: %v", c, err)
		}
	}
	if _, err := r.b.Status(ctx, "r1"); errCode(err) != protocol.NotFound {
		t.Fatalf("status of the deleted run: %v", err)
	}
	list, err := r.b.List(ctx)
	if err != nil || len(list.Runs) != 1 || list.Runs[0].RunID != "young" {
		t.Fatalf("inventory after compaction: %+v %v", list, err)
	}
	if res, err := r.b.Submit(ctx, "r1b", oneStep("k1", "echo")); err != nil || res.RunID != "r1b" {
		t.Fatalf("the deleted run's key: %v %v", res, err)
	}
	if n, err := r.b.Compact(context.Background(), time.Now().Add(-time.Hour), 10); err != nil || n != 0 {
		t.Fatalf("Compact with nothing old enough = %d, %v", n, err)
	}
}

// dirSize is the size of the files of dir, but the write-ahead log: its
// size is bounded by checkpoints, not by what the store holds.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && !e.IsDir() && !strings.HasSuffix(e.Name(), "-wal") {
			n += info.Size()
		}
	}
	return n
}

// TestDataDirectoryLevelsOff: under a steady workload of short runs with
// retention compacting every finished run, the SQLite data directory
// stops growing: freed pages are reused. The database file holds the
// pages only from the first WAL checkpoint on (after 1,000 WAL pages,
// within the first rounds): the reference is the size after round 5, and
// the next five rounds may add a quarter of it (a later checkpoint lands a
// few pages more; without reuse each round adds about a third of it).
func TestDataDirectoryLevelsOff(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	st, err := sqlite.Open(context.Background(), sqlite.Options{Dir: dir, Sync: "normal"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := newRig(t, st, 0)
	ctx := as("alice")
	const rounds, perRound = 10, 20
	sizes := make([]int64, rounds)
	for round := range rounds {
		for i := range perRound {
			id := fmt.Sprintf("run-%d-%d", round, i)
			if _, err := r.b.Submit(ctx, id, oneStep("key-"+id, "log:50")); err != nil {
				t.Fatal(err)
			}
		}
		for i := range perRound {
			waitFinished(t, r.b, ctx, fmt.Sprintf("run-%d-%d", round, i))
		}
		for {
			n, err := r.b.Compact(context.Background(), time.Now(), 16)
			if err != nil {
				t.Fatal(err)
			}
			if n < 16 {
				break
			}
		}
		sizes[round] = dirSize(t, dir)
	}
	t.Logf("data directory after each round: %v", sizes)
	if last, warm := sizes[rounds-1], sizes[4]; last > warm+warm/4 {
		t.Fatalf("the data directory kept growing: %d bytes after round 5, %d after round %d", warm, last, rounds)
	}
}
