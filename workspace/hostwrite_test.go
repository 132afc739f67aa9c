package workspace_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/oecp/oecp/workspace"
)

// hostWriteStep changes a work tree as an agent's step would.
type hostWriteStep func(h *hostileRun)

// hostWriteSteps change a work tree in ways a tree's writer can get wrong:
// nested and sibling directories whose names sort differently as trees
// ("a-b/" < "a.txt" < "a/"), links, executables, a file the same in two
// directories, odd names, removed directories, a blob moved to another
// path, a mode change alone, an empty file; the last step changes nothing.
var hostWriteSteps = []hostWriteStep{
	func(h *hostileRun) {
		w := h.p.Workspace
		h.writeFile(filepath.Join(w, "a", "b", "c.txt"), "c\n")
		h.writeFile(filepath.Join(w, "a", "b.txt"), "b\n")
		h.writeFile(filepath.Join(w, "a.txt"), "a\n")
		h.writeFile(filepath.Join(w, "a-b", "x"), "x\n")
		h.writeFile(filepath.Join(w, "dup1", "same"), "same\n")
		h.writeFile(filepath.Join(w, "dup2", "same"), "same\n")
		h.writeFile(filepath.Join(w, "odd", "new\nline \"q\" ü"), "odd\n")
		h.writeFile(filepath.Join(w, "README.md"), "# changed\n")
		h.writeFile(filepath.Join(w, "run.sh"), "#!/bin/sh\n")
		if err := os.Chmod(filepath.Join(w, "run.sh"), 0o755); err != nil {
			h.t.Fatal(err)
		}
		h.link("a/b/c.txt", filepath.Join(w, "lnk"))
	},
	func(h *hostileRun) {
		w := h.p.Workspace
		for _, p := range []string{"a/b", "dup2"} {
			if err := os.RemoveAll(filepath.Join(w, p)); err != nil {
				h.t.Fatal(err)
			}
		}
		h.writeFile(filepath.Join(w, "moved", "deep", "empty"), "")
		if err := os.Rename(filepath.Join(w, "a.txt"), filepath.Join(w, "moved", "deep", "a.txt")); err != nil {
			h.t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(w, "run.sh"), 0o644); err != nil {
			h.t.Fatal(err)
		}
	},
	func(h *hostileRun) {},
}

// timestamps are the seconds and zone of a commit's author and committer.
var timestamps = regexp.MustCompile(`(?m)> [0-9]+ \+0000$`)

// A snapshot the host writes itself is the commit git fast-import writes
// for the same work tree (the same tree, the same commit but for the
// time), step after step; its directory passes git fsck, its pack holds
// every object the commit adds, so that a repository holding only the
// source revision takes it as a bundle, and an unchanged tree writes
// nothing.
func TestHostWrittenSnapshotIsGits(t *testing.T) {
	ctx := context.Background()
	host, byGit := newHostileRun(t), newHostileRun(t)
	workspace.SetGitWrites(byGit.m, true)
	home := t.TempDir()
	gitOf := func(h *hostileRun) workspace.Git { return h.m.HostGit(h.key, home) }
	run := func(h *hostileRun, g workspace.Git, args ...string) string {
		t.Helper()
		out, err := g.Run(ctx, args...)
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return out
	}
	for i, step := range hostWriteSteps {
		step(host)
		step(byGit)
		mine, err := host.m.Snapshot(ctx, host.key, home, hostileID, "step\n", workspace.Limits{})
		if err != nil {
			t.Fatalf("step %d, host: %v", i, err)
		}
		theirs, err := byGit.m.Snapshot(ctx, byGit.key, home, hostileID, "step\n", workspace.Limits{})
		if err != nil {
			t.Fatalf("step %d, git: %v", i, err)
		}
		if i == len(hostWriteSteps)-1 {
			if mine.Changed || mine.Pack != nil {
				t.Fatalf("an unchanged tree wrote %+v", mine)
			}
			break
		}
		if !mine.Changed || mine.Pack == nil || theirs.Pack != nil {
			t.Fatalf("step %d: the host's snapshot %v (pack %d bytes), git's %v (pack %d bytes)", i, mine.Changed, len(mine.Pack), theirs.Changed, len(theirs.Pack))
		}
		g, gg := gitOf(host), gitOf(byGit)
		if a, b := run(host, g, "rev-parse", mine.Commit+"^{tree}"), run(byGit, gg, "rev-parse", theirs.Commit+"^{tree}"); a != b {
			t.Fatalf("step %d: the host wrote tree %s, git %s\nhost:\n%s\ngit:\n%s", i, a, b,
				run(host, g, "ls-tree", "-r", "-t", mine.Commit), run(byGit, gg, "ls-tree", "-r", "-t", theirs.Commit))
		}
		a := timestamps.ReplaceAllString(run(host, g, "cat-file", "commit", mine.Commit), "")
		b := timestamps.ReplaceAllString(run(byGit, gg, "cat-file", "commit", theirs.Commit), "")
		a = strings.Replace(a, mine.Parent, "PARENT", 1)
		b = strings.Replace(b, theirs.Parent, "PARENT", 1)
		if a != b {
			t.Fatalf("step %d: the host's commit\n%s\ngit's\n%s", i, a, b)
		}
		for _, ref := range []string{"HEAD", workspace.CheckpointRef} {
			if got := run(host, g, "rev-parse", ref); got != mine.Commit {
				t.Fatalf("step %d: %s is %s, not the snapshot %s", i, ref, got, mine.Commit)
			}
		}
		run(host, g, "fsck", "--full", "--strict", "--no-dangling")
		if i == 0 {
			if mine.Parent != host.src.Revision {
				t.Fatalf("the first snapshot's parent %s is not the source revision %s", mine.Parent, host.src.Revision)
			}
			takesBundle(t, host, mine)
		}
	}
}

// takesBundle checks that a bare clone of the run's remote, holding the
// source revision only, takes snap's pack as a bundle (the source
// revision required), and its tree is the snapshot's.
func takesBundle(t *testing.T, h *hostileRun, snap workspace.Snap) {
	t.Helper()
	dir := t.TempDir()
	bundle := filepath.Join(dir, "cp.bundle")
	header := "# v2 git bundle\n-" + snap.Parent + "\n" + snap.Commit + " refs/oecp/checkpoint\n\n"
	if err := os.WriteFile(bundle, append([]byte(header), snap.Pack...), 0o644); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(dir, "clone.git")
	for _, args := range [][]string{
		{"clone", "--quiet", "--bare", "--no-local", h.remote.Dir, clone},
		{"-C", clone, "bundle", "verify", "--quiet", bundle},
		{"-C", clone, "fetch", "--quiet", bundle, "refs/oecp/checkpoint:refs/heads/cp"},
		{"-C", clone, "fsck", "--full", "--strict", "--no-dangling"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	out, err := exec.Command("git", "-C", clone, "rev-parse", "refs/heads/cp").Output()
	if err != nil || strings.TrimSpace(string(out)) != snap.Commit {
		t.Fatalf("the bundle gave %q (%v), not %s", out, err, snap.Commit)
	}
}

// A snapshot whose new files take more than HostWriteMax is written by
// git (no pack of the host's), and is the same commit either way.
func TestLargeSnapshotWrittenByGit(t *testing.T) {
	ctx := context.Background()
	h := newHostileRun(t)
	h.writeFile(filepath.Join(h.p.Workspace, "big.bin"), strings.Repeat("x", workspace.HostWriteMax+1))
	snap, err := h.m.Snapshot(ctx, h.key, t.TempDir(), hostileID, "big", workspace.Limits{})
	if err != nil || !snap.Changed || snap.Pack != nil {
		t.Fatalf("a large snapshot: changed %v, host pack %d bytes (%v)", snap.Changed, len(snap.Pack), err)
	}
	size, err := h.m.HostGit(h.key, t.TempDir()).Run(ctx, "cat-file", "-s", snap.Commit+":big.bin")
	if err != nil || size != strconv.Itoa(workspace.HostWriteMax+1) {
		t.Fatalf("the large file is recorded with size %q (%v)", size, err)
	}
}
