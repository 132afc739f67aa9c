package workspace_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oecp/oecp/workspace"
)

// TestSnapshotReadsOnlyWhatChanged: after the checkout, a snapshot of an
// unchanged work tree reads no file and makes no commit; a changed file is
// read again and recorded, an unchanged one is not read.
func TestSnapshotReadsOnlyWhatChanged(t *testing.T) {
	h := newHostileRun(t)
	ctx := context.Background()
	home := t.TempDir()
	snap, err := h.m.Snapshot(ctx, h.key, home, hostileID, "one", workspace.Limits{})
	if err != nil || snap.Changed || snap.Bytes != 0 || snap.Files != 1 {
		t.Fatalf("an unchanged checkout: %+v %v", snap, err)
	}
	h.writeFile(filepath.Join(h.p.Workspace, "README.md"), "# demo, longer now\n")
	snap, err = h.m.Snapshot(ctx, h.key, home, hostileID, "two", workspace.Limits{})
	if err != nil || !snap.Changed || snap.Bytes != int64(len("# demo, longer now\n")) {
		t.Fatalf("a changed file: %+v %v", snap, err)
	}
	body, err := h.m.HostGit(h.key, home).Run(ctx, "cat-file", "-p", snap.Commit+":README.md")
	if err != nil || body != "# demo, longer now" {
		t.Fatalf("recorded %q %v", body, err)
	}
	if err := os.Remove(filepath.Join(h.p.Host, "oecp-index")); err != nil {
		t.Fatal(err)
	}
	again, err := h.m.Snapshot(ctx, h.key, home, hostileID, "three", workspace.Limits{})
	if err != nil || again.Changed || again.Bytes != int64(len("# demo, longer now\n")) {
		t.Fatalf("without a cache every file is read, and nothing changed: %+v %v", again, err)
	}
}

// TestSnapshotOfATouchedTreeCommitsNothing: files read again (their stat
// changed) but holding what the branch records make no commit; the
// branch and the checkpoint ref stay.
func TestSnapshotOfATouchedTreeCommitsNothing(t *testing.T) {
	h := newHostileRun(t)
	ctx := context.Background()
	home := t.TempDir()
	readme := filepath.Join(h.p.Workspace, "README.md")
	body, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(readme); err != nil { // a new inode, the same content
		t.Fatal(err)
	}
	h.writeFile(readme, string(body))
	snap, err := h.m.Snapshot(ctx, h.key, home, hostileID, "one", workspace.Limits{})
	if err != nil || snap.Changed || snap.Commit != h.src.Revision || snap.Bytes != int64(len(body)) {
		t.Fatalf("a rewritten, unchanged file: %+v %v", snap, err)
	}
}

// TestSnapshotKeepsItsPackUntilTheBound: a snapshot's new objects stay in
// the pack git wrote (no loose object, so no unpacking process) while the
// host git directory holds fewer packs than git's own maintenance bound;
// at the bound they are loose again. The branch names each new commit.
func TestSnapshotKeepsItsPackUntilTheBound(t *testing.T) {
	h := newHostileRun(t)
	ctx := context.Background()
	home := t.TempDir()
	packDir := filepath.Join(h.p.Host, "objects", "pack")
	readme := filepath.Join(h.p.Workspace, "README.md")
	h.writeFile(readme, "# one\n")
	snap, err := h.m.Snapshot(ctx, h.key, home, hostileID, "one", workspace.Limits{})
	if err != nil || !snap.Changed {
		t.Fatalf("a changed file: %+v %v", snap, err)
	}
	if packs, loose := objectFiles(t, h.p.Host); packs != 1 || loose != 0 {
		t.Fatalf("after one snapshot: %d packs, %d loose objects; want 1 and 0", packs, loose)
	}
	if head, err := h.m.Head(ctx, h.key, home); err != nil || head != snap.Commit {
		t.Fatalf("the branch names %s (%v), the snapshot %s", head, err, snap.Commit)
	}
	// Packs without an index are not git's: only the count is reached.
	for i := range workspace.KeptPacks - 1 {
		h.writeFile(filepath.Join(packDir, fmt.Sprintf("pack-filler%02d.pack", i)), "")
	}
	h.writeFile(readme, "# two\n")
	snap, err = h.m.Snapshot(ctx, h.key, home, hostileID, "two", workspace.Limits{})
	if err != nil || !snap.Changed {
		t.Fatalf("a changed file at the bound: %+v %v", snap, err)
	}
	if packs, loose := objectFiles(t, h.p.Host); packs != workspace.KeptPacks || loose == 0 {
		t.Fatalf("at the bound: %d packs, %d loose objects; want %d and some", packs, loose, workspace.KeptPacks)
	}
	body, err := h.m.HostGit(h.key, home).Run(ctx, "cat-file", "-p", snap.Commit+":README.md")
	if err != nil || body != "# two" {
		t.Fatalf("recorded %q %v", body, err)
	}
}

// objectFiles counts the packs and the loose objects of the git directory
// dir.
func objectFiles(t *testing.T, dir string) (packs, loose int) {
	t.Helper()
	objects := filepath.Join(dir, "objects")
	names, err := os.ReadDir(filepath.Join(objects, "pack"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		if strings.HasSuffix(e.Name(), ".pack") {
			packs++
		}
	}
	fanout, _ := filepath.Glob(filepath.Join(objects, "[0-9a-f][0-9a-f]", "*"))
	return packs, len(fanout)
}

// TestSnapshotsInARowReadOnlyWhatChanged: snapshots taken one after the
// other, as the steps of a run make them within a second, each read only
// the file changed since the last one, once the file system's clock has
// moved past that change; none reads the unchanged files again.
func TestSnapshotsInARowReadOnlyWhatChanged(t *testing.T) {
	h := newHostileRun(t)
	ctx := context.Background()
	home := t.TempDir()
	readme := filepath.Join(h.p.Workspace, "README.md")
	other := filepath.Join(h.p.Workspace, "other.txt")
	h.writeFile(other, "stays as it is\n")
	awaitTick(t, other)
	snap, err := h.m.Snapshot(ctx, h.key, home, hostileID, "add", workspace.Limits{})
	if err != nil || !snap.Changed || snap.Bytes != int64(len("stays as it is\n")) {
		t.Fatalf("the new file: %+v %v", snap, err)
	}
	for i := range 3 {
		body := fmt.Sprintf("# step %d\n", i)
		h.writeFile(readme, body)
		awaitTick(t, readme)
		snap, err := h.m.Snapshot(ctx, h.key, home, hostileID, body, workspace.Limits{})
		if err != nil || !snap.Changed || snap.Bytes != int64(len(body)) {
			t.Fatalf("step %d read %d bytes (want %d, the changed file alone): %+v %v", i, snap.Bytes, len(body), snap, err)
		}
	}
	snap, err = h.m.Snapshot(ctx, h.key, home, hostileID, "same", workspace.Limits{})
	if err != nil || snap.Changed || snap.Bytes != 0 {
		t.Fatalf("an unchanged tree right after a snapshot: %+v %v", snap, err)
	}
}

// awaitTick returns once a file the test makes beside path has a change
// time after path's: the file system's clock has moved past path's last
// change.
func awaitTick(t *testing.T, path string) {
	t.Helper()
	was, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(t.TempDir(), "tick")
	for range 1_000_000 { // a clock tick is milliseconds: a few hundred rounds
		if err := os.WriteFile(probe, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(probe, time.Time{}, time.Now()); err != nil {
			t.Fatal(err)
		}
		now, err := os.Lstat(probe)
		if err != nil {
			t.Fatal(err)
		}
		if ctime(now) > ctime(was) {
			return
		}
	}
	t.Fatalf("the file system's clock did not pass %s's change time", path)
}

func ctime(info os.FileInfo) int64 {
	st := info.Sys().(*syscall.Stat_t)
	return st.Ctim.Sec*1e9 + st.Ctim.Nsec
}
