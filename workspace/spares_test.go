package workspace_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/workspace"
)

// TestSpareWorkTreeIsTakenWhole: once a run has checked out a commit, the
// host writes that commit's tree again ahead, and the next checkout of it
// takes that tree whole (the same inodes): it is git's checkout to the
// byte, given to the run's writer (every entry) when there is one, read by
// git as unchanged and by the first snapshot without reading a file;
// nothing of the spare is left beside it. Closing the manager removes the
// spare not taken.
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
	prepare := func(run string) workspace.Paths { return prepareRun(t, m, src, run, owner) }

	byGit := prepare("first")
	if n := workspace.Spares(m); n != 1 {
		t.Fatalf("%d spares after the first checkout", n)
	}
	workspace.AwaitSpares(t, m)
	works, _ := filepath.Glob(filepath.Join(workspace.SparesDir(m), "*", "*", "workspace"))
	if len(works) != 1 {
		t.Fatalf("spares written: %q", works)
	}
	spareInode := inode(t, filepath.Join(works[0], "a", "b", "c.go"))
	fromSpare := prepare("second")
	if inode(t, filepath.Join(fromSpare.Workspace, "a", "b", "c.go")) != spareInode {
		t.Fatal("the second checkout is not the spare's tree")
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
		ownedBy(t, fromSpare.Workspace, uid)
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
	if _, err := os.Lstat(filepath.Dir(works[0])); !os.IsNotExist(err) {
		t.Fatalf("the directory of the spare taken is left: %v", err)
	}

	// The second checkout had the next spare written; one not taken is
	// removed when the manager closes.
	if n := workspace.Spares(m); n != 1 {
		t.Fatalf("%d spares after the second checkout", n)
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
			prepare := func(run string) workspace.Paths { return prepareRun(t, m, src, run, nil) }
			byGit := prepare("first")
			workspace.AwaitSpares(t, m)
			works, _ := filepath.Glob(filepath.Join(workspace.SparesDir(m), "*", "*", "workspace"))
			if len(works) != 1 {
				t.Fatalf("spares written: %q", works)
			}
			if err := spoil(works[0]); err != nil {
				t.Fatal(err)
			}
			again := prepare("second")
			if _, err := os.Lstat(works[0]); !os.IsNotExist(err) {
				t.Fatalf("the changed spare is left: %v", err)
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

// inode is the inode number of the file at path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Ino
}

// TestCheckoutWaitsForItsSpareBeingWritten: a checkout that comes while
// the spare of its commit is still being written waits for it and takes
// it whole, rather than write a second tree beside it; a second checkout
// meanwhile does not wait for the same spare but writes its own. Both
// trees are git's checkout to the byte.
func TestCheckoutWaitsForItsSpareBeingWritten(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the host writes kept trees on Linux only")
	}
	remote, head := keptSeed(t)
	m := manager(t, repos(t, map[string]workspace.Repo{"acme/app": {URL: remote}}), time.Hour)
	release, written, waiting := workspace.HoldSpares(m, "a/b/c.go")
	defer release()
	src := workspace.Source{Repository: "acme/app", Branch: "main", Revision: head}
	byGit := prepareRun(t, m, src, "first", nil)

	prepare := func(run string) <-chan error {
		done := make(chan error, 1)
		go func() {
			done <- m.PrepareFor(context.Background(), workspace.Key("tenant", run), src, workspace.Branch("tenant", run), nil)
		}()
		return done
	}
	second := prepare("second")
	select {
	case <-waiting:
	case err := <-second:
		t.Fatalf("the checkout wrote its own tree while its spare was being written (%v)", err)
	}
	// Another checkout of the commit meanwhile writes its own tree.
	if err := testkit.Recv(t, prepare("third")); err != nil {
		t.Fatal(err)
	}
	release()
	spareInode := testkit.Recv(t, written)
	if err := testkit.Recv(t, second); err != nil {
		t.Fatal(err)
	}
	want := treeOf(t, byGit.Workspace)
	for _, run := range []string{"second", "third"} {
		p, err := m.Paths(workspace.Key("tenant", run))
		if err != nil {
			t.Fatal(err)
		}
		got := treeOf(t, p.Workspace)
		if len(got) != len(want) {
			t.Errorf("%s: %d entries, git's %d", run, len(got), len(want))
		}
		for path, w := range want {
			if got[path] != w {
				t.Errorf("%s: %s: %q, git's %q", run, path, got[path], w)
			}
		}
		if out := gitAt(t, p.Git, p.Workspace, "status", "--porcelain"); out != "" {
			t.Errorf("%s: the agents' git sees changes:\n%s", run, out)
		}
		if ino := inode(t, filepath.Join(p.Workspace, "a", "b", "c.go")); (ino == spareInode) != (run == "second") {
			t.Errorf("%s: its tree is the spare's: %v", run, ino == spareInode)
		}
	}
}
