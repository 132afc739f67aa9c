package workspace_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/workspace"
)

// host is a manager over a known root serving acme/app from remote.
type host struct {
	t      *testing.T
	root   string
	remote *gittest.Remote
	m      *workspace.Manager
}

func newHost(t *testing.T, remote *gittest.Remote, keep time.Duration) *host {
	h := &host{t: t, root: t.TempDir(), remote: remote}
	h.m = workspace.NewManager(h.root, repos(t, map[string]workspace.Repo{"acme/app": {URL: remote.Dir}}), keep, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { h.m.Close() })
	return h
}

// restart closes the manager (waiting for its removals) and opens
// another on the same root, serving r.
func (h *host) restart(r *workspace.Repos, keep time.Duration) {
	h.m.Close()
	h.m = workspace.NewManager(h.root, r, keep, slog.New(slog.DiscardHandler))
}

func (h *host) prepare(run, revision string) workspace.Paths {
	h.t.Helper()
	key := workspace.Key("t", run)
	if err := h.m.Prepare(context.Background(), key, workspace.Source{Repository: "acme/app", Branch: "main", Revision: revision}, workspace.Branch("t", run)); err != nil {
		h.t.Fatalf("prepare %s: %v", run, err)
	}
	p, _ := h.m.Paths(key)
	return p
}

// mirror is the one mirror under the root.
func (h *host) mirror() string {
	h.t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(h.root, "mirrors", "*.git"))
	if len(dirs) != 1 {
		h.t.Fatalf("mirrors %v, want one", dirs)
	}
	return dirs[0]
}

// runRefs lists the mirror's run refs.
func (h *host) runRefs() []string {
	return strings.Fields(h.remote.Git(h.mirror(), "for-each-ref", "--format=%(refname)", "refs/oecp/runs/"))
}

// healthy checks that a run's checkout reads every object its history
// needs, at revision.
func (h *host) healthy(p workspace.Paths, revision string) {
	h.t.Helper()
	h.remote.Git(p.Workspace, "fsck", "--connectivity-only", "--no-dangling")
	if head := h.remote.Git(p.Workspace, "rev-parse", "HEAD"); head != revision {
		h.t.Fatalf("HEAD %s, want %s", head, revision)
	}
	h.remote.Git(p.Workspace, "log", "--stat", "--format=%H")
}

// Several runs of one repository, prepared at once, share one mirror:
// each has its own git directory with its own branch only, borrowing the
// mirror's objects and holding none of the history. Two managers share
// the root, as two processes would: only the mirror's file lock orders
// them.
func TestConcurrentRunsBorrowOneMirror(t *testing.T) {
	remote := gittest.NewRemote(t)
	older := remote.Head()
	newer := remote.Commit("a.txt", "a\n", "second")
	remote.Push("refs/heads/main")
	h := newHost(t, remote, time.Hour)
	other := workspace.NewManager(h.root, repos(t, map[string]workspace.Repo{"acme/app": {URL: remote.Dir}}), time.Hour, slog.New(slog.DiscardHandler))
	t.Cleanup(other.Close)
	runs := []string{"run-1", "run-2", "run-3", "run-4"}
	revs := map[string]string{"run-1": older, "run-2": newer, "run-3": older, "run-4": newer}
	var wg sync.WaitGroup
	errs := make(chan error, len(runs))
	for i, run := range runs {
		m := h.m
		if i%2 == 1 {
			m = other
		}
		wg.Go(func() {
			errs <- m.Prepare(context.Background(), workspace.Key("t", run), workspace.Source{Repository: "acme/app", Branch: "main", Revision: revs[run]}, workspace.Branch("t", run))
		})
	}
	testkit.Wait(t, &wg)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	objects := filepath.Join(h.mirror(), "objects")
	for _, run := range runs {
		p, _ := h.m.Paths(workspace.Key("t", run))
		h.healthy(p, revs[run])
		alt, err := os.ReadFile(filepath.Join(p.Git, "objects", "info", "alternates"))
		if err != nil || filepath.Join(p.Git, "objects", strings.TrimSpace(string(alt))) != objects {
			t.Fatalf("%s alternates %q (%v), want %s", run, alt, err, objects)
		}
		if count := remote.Git(p.Workspace, "count-objects", "-v"); !strings.Contains(count, "count: 0\n") || !strings.Contains(count, "in-pack: 0\n") {
			t.Fatalf("%s holds objects of its own:\n%s", run, count)
		}
		if refs := remote.Git(p.Workspace, "for-each-ref", "--format=%(refname)"); refs != "refs/heads/"+workspace.Branch("t", run) {
			t.Fatalf("%s refs:\n%s", run, refs)
		}
	}
	if refs := h.runRefs(); len(refs) != len(runs) {
		t.Fatalf("run refs %v", refs)
	}
}

// A revision pushed after the mirror was made, and a commit no branch
// holds, are fetched on demand; pinned, they survive the mirror's most
// aggressive maintenance.
func TestRevisionFetchedOnDemand(t *testing.T) {
	remote := gittest.NewRemote(t)
	h := newHost(t, remote, time.Hour)
	h.prepare("run-1", remote.Head())
	pushed := remote.Commit("b.txt", "b\n", "pushed later")
	remote.Push("refs/heads/main")
	hidden := remote.Commit("c.txt", "c\n", "hidden")
	remote.Push("refs/pull/7/head") // on no branch: the mirror fetches branches only
	p2 := h.prepare("run-2", pushed)
	p3 := h.prepare("run-3", hidden)
	if branches := remote.Git(h.mirror(), "for-each-ref", "--format=%(refname)", "refs/heads/"); branches != "refs/heads/main" {
		t.Fatalf("mirror branches %q", branches)
	}
	remote.Git(h.mirror(), "reflog", "expire", "--expire=now", "--all")
	remote.Git(h.mirror(), "gc", "--quiet", "--prune=now")
	h.healthy(p2, pushed)
	h.healthy(p3, hidden)
}

// A revision the mirror holds is pinned for the run as it is; an object
// of the mirror that is not a commit (a tree here) is refused as a
// revision, and pins nothing.
func TestMirrorPinsOnlyCommits(t *testing.T) {
	remote := gittest.NewRemote(t)
	h := newHost(t, remote, time.Hour)
	head := remote.Head()
	h.prepare("run-1", head)
	p2 := h.prepare("run-2", head) // the mirror holds it now
	h.healthy(p2, head)
	pins := map[string]string{}
	for _, ref := range h.runRefs() {
		pins[ref] = h.remote.Git(h.mirror(), "rev-parse", ref)
	}
	if len(pins) != 2 {
		t.Fatalf("run refs %v, want one per run", pins)
	}
	for ref, rev := range pins {
		if rev != head {
			t.Errorf("%s pins %s, want %s", ref, rev, head)
		}
	}
	tree := remote.Git(remote.Dir, "rev-parse", head+"^{tree}")
	err := h.m.Prepare(context.Background(), workspace.Key("t", "run-3"), workspace.Source{Repository: "acme/app", Branch: "main", Revision: tree}, workspace.Branch("t", "run-3"))
	if !errors.Is(err, workspace.ErrRevisionNotFound) {
		t.Fatalf("a tree as the revision: %v", err)
	}
	if refs := h.runRefs(); len(refs) != 2 {
		t.Fatalf("run refs after the refusal %v", refs)
	}
}

// Removing a run drops its pin and nothing else: the mirror and the
// other runs stay whole, and new runs still borrow from it.
func TestRemovedRunLeavesMirrorAndOthers(t *testing.T) {
	remote := gittest.NewRemote(t)
	hidden := remote.Commit("c.txt", "c\n", "hidden")
	remote.Push("refs/pull/1/head")
	h := newHost(t, remote, 0)
	p1 := h.prepare("run-1", remote.Head())
	p2 := h.prepare("run-2", hidden)
	remote.Git(remote.Dir, "update-ref", "-d", "refs/pull/1/head")
	h.m.Finish(workspace.Key("t", "run-2"))
	h.restart(repos(t, map[string]workspace.Repo{"acme/app": {URL: remote.Dir}}), time.Hour) // waits for the removal
	if _, err := os.Stat(p2.Dir); !os.IsNotExist(err) {
		t.Fatalf("run-2 kept: %v", err)
	}
	if refs := h.runRefs(); len(refs) != 1 {
		t.Fatalf("run refs after the removal %v", refs)
	}
	remote.Git(h.mirror(), "gc", "--quiet", "--prune=now")
	h.healthy(p1, remote.Head())
	h.prepare("run-3", remote.Head())
}

// A damaged or half-made mirror is found and made anew, keeping the
// revisions the live runs borrow; those runs read their history again.
func TestCorruptMirrorIsFetchedAgain(t *testing.T) {
	damage := map[string]func(t *testing.T, remote *gittest.Remote, mirror string){
		"pack deleted": func(t *testing.T, remote *gittest.Remote, mirror string) {
			remote.Git(mirror, "repack", "-a", "-d", "--quiet")
			packs, _ := filepath.Glob(filepath.Join(mirror, "objects", "pack", "*.pack"))
			removeAll(t, packs...)
		},
		"pack truncated": func(t *testing.T, remote *gittest.Remote, mirror string) {
			remote.Git(mirror, "repack", "-a", "-d", "--quiet")
			packs, _ := filepath.Glob(filepath.Join(mirror, "objects", "pack", "*.pack"))
			for _, p := range packs {
				if st, err := os.Stat(p); err != nil || os.Truncate(p, st.Size()/2) != nil {
					t.Fatalf("truncate %s", p)
				}
			}
		},
		"loose objects deleted": func(t *testing.T, remote *gittest.Remote, mirror string) {
			var loose []string
			_ = filepath.WalkDir(filepath.Join(mirror, "objects"), func(path string, d fs.DirEntry, _ error) error {
				if d != nil && !d.IsDir() && len(filepath.Base(filepath.Dir(path))) == 2 {
					loose = append(loose, path)
				}
				return nil
			})
			if len(loose) == 0 {
				t.Fatal("no loose objects to delete")
			}
			removeAll(t, loose...)
		},
		"half made": func(t *testing.T, remote *gittest.Remote, mirror string) {
			removeAll(t, filepath.Join(mirror, "oecp-complete"))
		},
	}
	for name, spoil := range damage {
		t.Run(name, func(t *testing.T) {
			remote := gittest.NewRemote(t)
			hidden := remote.Commit("c.txt", "c\n", "hidden")
			remote.Push("refs/pull/1/head")
			h := newHost(t, remote, time.Hour)
			p1 := h.prepare("run-1", hidden)
			spoil(t, remote, h.mirror())
			p2 := h.prepare("run-2", remote.Head())
			h.healthy(p2, remote.Head())
			h.healthy(p1, hidden)
			if refs := h.runRefs(); len(refs) != 2 {
				t.Fatalf("run refs %v", refs)
			}
		})
	}
}

func removeAll(t *testing.T, paths ...string) {
	for _, p := range paths {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
}

// Retention: at startup, the pins of runs whose directory is gone are
// dropped, and the mirror of a repository no longer served goes once no
// run borrows from it.
func TestMirrorRetention(t *testing.T) {
	remote := gittest.NewRemote(t)
	h := newHost(t, remote, time.Hour)
	h.prepare("run-1", remote.Head())
	p2 := h.prepare("run-2", remote.Head())
	removeDir(t, p2.Dir) // gone behind the manager's back
	served := repos(t, map[string]workspace.Repo{"acme/app": {URL: remote.Dir}})
	h.restart(served, time.Hour)
	h.m.Sweep()
	h.restart(nil, time.Hour)
	if refs := h.runRefs(); len(refs) != 1 {
		t.Fatalf("run refs after the sweep %v", refs)
	}
	// Not served any more, but run-1 still borrows from it.
	h.m.Sweep()
	mirror := h.mirror()
	p1, _ := h.m.Paths(workspace.Key("t", "run-1"))
	h.m.Finish(workspace.Key("t", "run-1"))
	h.restart(nil, 0)
	// This start removes run-1's directory; its removal and the sweep may
	// wait for each other on the mirror's lock until Close, so the next
	// start's sweep, alone, is the one certain to drop the mirror.
	h.m.Sweep()
	h.restart(nil, 0)
	h.m.Sweep()
	h.m.Close()
	for _, gone := range []string{p1.Dir, mirror} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Fatalf("%s kept: %v", gone, err)
		}
	}
}

func removeDir(t *testing.T, dir string) {
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}

// Delivery pushes from a run's git directory, which holds no history: the
// push to a remote that has none of it sends the borrowed objects too.
func TestPushFromABorrowedWorkspace(t *testing.T) {
	remote := gittest.NewRemote(t)
	second := remote.Commit("a.txt", "a\n", "second")
	remote.Push("refs/heads/main")
	h := newHost(t, remote, time.Hour)
	p := h.prepare("run-1", second)
	if err := os.WriteFile(filepath.Join(p.Workspace, "new.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := workspace.Git{Dir: p.Workspace, GitDir: p.Git, Home: t.TempDir()}
	ctx := context.Background()
	for _, args := range [][]string{{"add", "--all"}, {"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "--quiet", "-m", "work"}} {
		if _, err := g.Run(ctx, args...); err != nil {
			t.Fatal(err)
		}
	}
	head, _ := g.Run(ctx, "rev-parse", "HEAD")
	// The new commit, tree and blob are the run's own, not the mirror's.
	if count := remote.Git(p.Workspace, "count-objects", "-v"); !strings.Contains(count, "count: 3\n") {
		t.Fatalf("the run's git directory:\n%s", count)
	}
	if remote.Git(h.mirror(), "cat-file", "-t", h.remote.Head()) != "commit" || exec.Command("git", "-C", h.mirror(), "cat-file", "-e", head).Run() == nil {
		t.Fatal("the run's commit landed in the mirror")
	}
	empty := filepath.Join(t.TempDir(), "empty.git")
	remote.Git(t.TempDir(), "init", "--quiet", "--bare", empty)
	if _, err := g.Run(ctx, "push", "--quiet", empty, "HEAD:refs/heads/delivered"); err != nil {
		t.Fatal(err)
	}
	remote.Git(empty, "fsck", "--no-dangling")
	if got := remote.Git(empty, "rev-list", "--count", "refs/heads/delivered"); got != "3" || remote.Git(empty, "rev-parse", "refs/heads/delivered") != head {
		t.Fatalf("delivered %s commits", got)
	}
}

// A run's git directory names its mirror relative to itself: the data
// directory may move, and its prepared workspaces stay whole.
func TestMovedDataDirectoryKeepsWorkspaces(t *testing.T) {
	remote := gittest.NewRemote(t)
	h := newHost(t, remote, time.Hour)
	h.prepare("run-1", remote.Head())
	h.m.Close()
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(h.root, moved); err != nil {
		t.Fatal(err)
	}
	h.root = moved
	h.restart(repos(t, map[string]workspace.Repo{"acme/app": {URL: remote.Dir}}), time.Hour)
	key := workspace.Key("t", "run-1")
	if !h.m.Prepared(key, workspace.Source{Repository: "acme/app", Branch: "main", Revision: remote.Head()}) {
		t.Fatal("the moved workspace is not prepared any more")
	}
	p, _ := h.m.Paths(key)
	h.healthy(p, remote.Head())
}
