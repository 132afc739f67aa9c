package workspace_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

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
