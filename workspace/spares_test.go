package workspace_test

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/oecp/oecp/workspace"
)

// TestSpareWorkTreeIsTakenWhole: once a run that checked out a commit
// finishes, the host writes that commit's tree ahead, and the next
// checkout of it takes that tree whole: it is git's checkout to the byte,
// given to the run's writer (every entry) when there is one, read by git
// as unchanged and by the first snapshot without reading a file; nothing
// of the spare is left beside it. Closing the manager removes the spares
// not taken.
func TestSpareWorkTreeIsTakenWhole(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the host writes kept trees on Linux only")
	}
	remote, head := keptSeed(t)
	m := workspace.NewManager(t.TempDir(), repos(t, map[string]workspace.Repo{"acme/app": {URL: remote}}), time.Hour, slog.New(slog.DiscardHandler))
	defer m.Close()
	src := workspace.Source{Repository: "acme/app", Branch: "main", Revision: head}
	ctx := context.Background()
	uid, owner := -1, workspace.Owner(nil)
	if os.Geteuid() == 0 {
		uid = 54321
		owner = func() (int, bool) { return uid, true }
	}
	prepare := func(run string) workspace.Paths {
		t.Helper()
		key := workspace.Key("tenant", run)
		if err := m.PrepareFor(ctx, key, src, workspace.Branch("tenant", run), owner); err != nil {
			t.Fatal(err)
		}
		p, err := m.Paths(key)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	byGit := prepare("first")
	if n := workspace.Spares(m); n != 0 {
		t.Fatalf("%d spares before any run finished", n)
	}
	m.Finish(workspace.Key("tenant", "first"))
	if n := workspace.Spares(m); n != 1 {
		t.Fatalf("%d spares once the first run finished", n)
	}
	fromSpare := prepare("second")
	if n := workspace.Spares(m); n != 0 {
		t.Fatalf("%d spares once the second run took it", n)
	}
	want, got := treeOf(t, byGit.Workspace), treeOf(t, fromSpare.Workspace)
	if len(got) != len(want) {
		t.Errorf("the spare has %d entries, git's checkout %d", len(got), len(want))
	}
	for path, w := range want {
		if got[path] != w {
			t.Errorf("%s: spare %q, git's %q", path, got[path], w)
		}
	}
	if uid >= 0 {
		err := filepath.WalkDir(fromSpare.Workspace, func(path string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := os.Lstat(path)
			if err == nil {
				if st := info.Sys().(*syscall.Stat_t); st.Uid != uint32(uid) || st.Gid != uint32(uid) {
					t.Errorf("%s belongs to %d:%d", path, st.Uid, st.Gid)
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if out := gitAt(t, fromSpare.Git, fromSpare.Workspace, "status", "--porcelain"); out != "" {
		t.Errorf("the agents' git sees changes in the spare:\n%s", out)
	}
	if out := gitAt(t, fromSpare.Host, fromSpare.Workspace, "diff-index", "--cached", "HEAD"); out != "" {
		t.Errorf("the host's index is not the commit:\n%s", out)
	}
	snap, err := m.Snapshot(ctx, workspace.Key("tenant", "second"), t.TempDir(), hostileID, "first", workspace.Limits{})
	if err != nil || snap.Changed || snap.Bytes != 0 {
		t.Fatalf("the first snapshot of an untouched spare: %+v %v", snap, err)
	}
	var left []string
	_ = filepath.WalkDir(workspace.SparesDir(m), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, path)
		}
		return nil
	})
	if len(left) != 0 {
		t.Fatalf("files left of the spare taken: %q", left)
	}

	// A spare not taken is removed when the manager closes.
	m.Finish(workspace.Key("tenant", "second"))
	if n := workspace.Spares(m); n != 1 {
		t.Fatalf("%d spares once the second run finished", n)
	}
	m.Close()
	if entries, err := os.ReadDir(workspace.SparesDir(m)); err != nil || len(entries) != 0 {
		t.Fatalf("spares left after Close: %v %v", entries, err)
	}
}

// TestSpareChangedIsNotTaken: a spare that is no longer what the host
// wrote (a file gone, a file rewritten) is not taken as it is: the
// checkout is written anew, git's tree to the byte, and git sees no
// change in it.
func TestSpareChangedIsNotTaken(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the host writes kept trees on Linux only")
	}
	for name, spoil := range map[string]func(work string) error{
		"file gone":      func(work string) error { return os.Remove(filepath.Join(work, "a0")) },
		"file rewritten": func(work string) error { return os.WriteFile(filepath.Join(work, "a", "z"), []byte("Z\n"), 0o644) },
	} {
		t.Run(name, func(t *testing.T) {
			remote, head := keptSeed(t)
			m := manager(t, repos(t, map[string]workspace.Repo{"acme/app": {URL: remote}}), time.Hour)
			src := workspace.Source{Repository: "acme/app", Branch: "main", Revision: head}
			ctx := context.Background()
			prepare := func(run string) workspace.Paths {
				t.Helper()
				key := workspace.Key("tenant", run)
				if err := m.Prepare(ctx, key, src, workspace.Branch("tenant", run)); err != nil {
					t.Fatal(err)
				}
				p, _ := m.Paths(key)
				return p
			}
			byGit := prepare("first")
			m.Finish(workspace.Key("tenant", "first"))
			workspace.AwaitSpares(m)
			works, _ := filepath.Glob(filepath.Join(workspace.SparesDir(m), "*", "*", "workspace"))
			if len(works) != 1 {
				t.Fatalf("spares written: %q", works)
			}
			if err := spoil(works[0]); err != nil {
				t.Fatal(err)
			}
			again := prepare("second")
			if n := workspace.Spares(m); n != 0 {
				t.Fatalf("%d spares left", n)
			}
			want, got := treeOf(t, byGit.Workspace), treeOf(t, again.Workspace)
			for path, w := range want {
				if got[path] != w {
					t.Errorf("%s: %q, git's %q", path, got[path], w)
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d entries, git's %d", len(got), len(want))
			}
			if out := gitAt(t, again.Git, again.Workspace, "status", "--porcelain"); out != "" {
				t.Errorf("the agents' git sees changes:\n%s", out)
			}
		})
	}
}
