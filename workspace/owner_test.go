package workspace_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/workspace"
)

// TestPrepareForGivesTheTreeBeforeItsIndex: a work tree prepared for an
// owner belongs to that UID, every entry of it, and the host's record of
// it is taken after the change of owner, so the first snapshot reads no
// file. Given after the record (what the sandbox did at the first
// execution), the change of owner alone has the snapshot read every file.
func TestPrepareForGivesTheTreeBeforeItsIndex(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving files to another UID needs root")
	}
	const uid = 54321
	r := gittest.NewRemote(t)
	r.Commit("a.go", "package a\n", "more")
	head := r.Commit("b.txt", "b\n", "more")
	r.Push("refs/heads/main")
	m := manager(t, repos(t, map[string]workspace.Repo{"acme/app": {URL: r.Dir}}), time.Hour)
	src := workspace.Source{Repository: "acme/app", Branch: "main", Revision: head}
	ctx := context.Background()
	asked := 0
	owner := func() (int, bool) { asked++; return uid, true }

	owned := workspace.Key("tenant", "owned")
	if err := m.PrepareFor(ctx, owned, src, workspace.Branch("tenant", "owned"), owner); err != nil {
		t.Fatal(err)
	}
	p, _ := m.Paths(owned)
	if _, files := ownedBy(t, p.Workspace, uid); files < 3 || asked != 2 {
		t.Fatalf("walked %d files, owner asked %d times", files, asked)
	}
	snap, err := m.Snapshot(ctx, owned, t.TempDir(), hostileID, "first", workspace.Limits{})
	if err != nil || snap.Changed || snap.Bytes != 0 {
		t.Fatalf("the first snapshot of an untouched tree given before its record: %+v %v", snap, err)
	}

	// The same change of owner after the record invalidates it.
	later := workspace.Key("tenant", "later")
	if err := m.Prepare(ctx, later, src, workspace.Branch("tenant", "later")); err != nil {
		t.Fatal(err)
	}
	lp, _ := m.Paths(later)
	err = filepath.WalkDir(lp.Workspace, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, err = m.Snapshot(ctx, later, t.TempDir(), hostileID, "first", workspace.Limits{})
	if err != nil || snap.Changed || snap.Bytes == 0 {
		t.Fatalf("a tree given after its record is read again: %+v %v", snap, err)
	}
}

// TestPrepareForWithoutAnOwnerKeepsTheHosts: an owner that gives no UID
// leaves the tree the host's.
func TestPrepareForWithoutAnOwnerKeepsTheHosts(t *testing.T) {
	r := gittest.NewRemote(t)
	m := manager(t, repos(t, map[string]workspace.Repo{"acme/app": {URL: r.Dir}}), time.Hour)
	key := workspace.Key("tenant", "mine")
	src := workspace.Source{Repository: "acme/app", Branch: "main", Revision: r.Head()}
	if err := m.PrepareFor(context.Background(), key, src, workspace.Branch("tenant", "mine"), func() (int, bool) { return 54321, false }); err != nil {
		t.Fatal(err)
	}
	p, _ := m.Paths(key)
	info, err := os.Lstat(filepath.Join(p.Workspace, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if st := info.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() {
		t.Fatalf("README.md belongs to %d", st.Uid)
	}
}

// TestRunsRemovedAtOnceAreWrittenApart: where finished runs are removed at
// once, the root of the run directories and each tenant's directory carry
// the hint that their subdirectories are unrelated (on a file system that
// has it), so that a run's files are not placed among the inodes of the
// runs removed just before it; with a retention period they carry none
// (runs stay together), and a hint left by an earlier server is cleared.
func TestRunsRemovedAtOnceAreWrittenApart(t *testing.T) {
	probe := t.TempDir()
	if err := workspace.SetSpread(probe, true); err != nil {
		t.Skipf("this file system takes no placement hint: %v", err)
	}
	root := t.TempDir()
	check := func(keep time.Duration, run string, want bool) {
		t.Helper()
		m := workspace.NewManager(root, nil, keep, nil)
		defer m.Close()
		p, err := m.Paths(workspace.Key("tenant", run))
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{root, filepath.Dir(p.Dir)} {
			if got, err := workspace.Spreads(dir); got != want || err != nil {
				t.Errorf("keep %v: %s carries the hint: %v (%v), want %v", keep, dir, got, err, want)
			}
		}
		if got, _ := workspace.Spreads(p.Dir); got {
			t.Errorf("keep %v: the run's own directory keeps its files together, yet carries the hint", keep)
		}
	}
	check(0, "run-1", true)
	check(time.Hour, "run-2", false)
	check(0, "run-3", true)
}

// TestPrepareForOwnerGoneMeanwhile: a run whose writer UID was given back
// while its tree was being given (the run ended; another may lease that
// UID now) is not prepared: the prepare fails, unavailable.
func TestPrepareForOwnerGoneMeanwhile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving files to another UID needs root")
	}
	r := gittest.NewRemote(t)
	m := manager(t, repos(t, map[string]workspace.Repo{"acme/app": {URL: r.Dir}}), time.Hour)
	key := workspace.Key("tenant", "gone")
	src := workspace.Source{Repository: "acme/app", Branch: "main", Revision: r.Head()}
	asked := 0
	owner := func() (int, bool) { asked++; return 54321, asked == 1 }
	err := m.PrepareFor(context.Background(), key, src, workspace.Branch("tenant", "gone"), owner)
	if !errors.Is(err, workspace.ErrUnavailable) || errors.Is(err, workspace.ErrRevisionNotFound) || asked != 2 {
		t.Fatalf("prepared for a writer gone meanwhile: %v (owner asked %d times)", err, asked)
	}
	if m.Prepared(key, src) {
		t.Fatal("the workspace is marked prepared")
	}
}
