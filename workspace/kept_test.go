package workspace_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oecp/oecp/workspace"
)

// keptSeed makes a repository whose one commit holds what a checkout can
// get wrong: paths whose bytewise order interleaves directories ("a-b/x",
// "a.txt", "a/b/c.go", "a/z", "a0"), a deep file, an empty file, an
// executable, a link, a gitlink, and an attribute that has git convert
// what it writes (CRLF line ends), so the tree git writes is not the
// blobs' bytes. It returns the repository and its commit.
func keptSeed(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "--quiet", "--initial-branch=main")
	files := map[string]string{
		".gitattributes": "*.txt text eol=crlf\n",
		"a.txt":          "one\ntwo\n",
		"a-b/x":          "x\n",
		"a/b/c.go":       "package b\n",
		"a/z":            "z\n",
		"a0":             "zero\n",
		"d1/d2/d3/d4/f":  "deep\n",
		"empty":          "",
		"run.sh":         "#!/bin/sh\necho run\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a/z", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	git("add", "-A")
	git("commit", "--quiet", "-m", "seed")
	git("update-index", "--add", "--cacheinfo", "160000,"+git("rev-parse", "HEAD")+",sub")
	git("commit", "--quiet", "-m", "gitlink")
	return dir, git("rev-parse", "HEAD")
}

// treeOf is each entry under dir (the .git file left out): its type and
// permission bits, and a file's bytes or a link's target.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == ".git" {
			return nil
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := info.Mode().String()
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(b)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// prepareRun prepares the run named run of tenant "tenant" at src, for
// owner (nil: the host's), and returns its directories.
func prepareRun(t *testing.T, m *workspace.Manager, src workspace.Source, run string, owner workspace.Owner) workspace.Paths {
	t.Helper()
	key := workspace.Key("tenant", run)
	if err := m.PrepareFor(context.Background(), key, src, workspace.Branch("tenant", run), owner); err != nil {
		t.Fatal(err)
	}
	p, err := m.Paths(key)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ownedBy fails the test for each entry under dir, dir too, that is not
// uid's (user and group), and returns how many entries and regular files
// it walked.
func ownedBy(t *testing.T, dir string, uid int) (entries, files int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		if st := info.Sys().(*syscall.Stat_t); st.Uid != uint32(uid) || st.Gid != uint32(uid) {
			t.Errorf("%s belongs to %d:%d", path, st.Uid, st.Gid)
		}
		entries++
		if d.Type().IsRegular() {
			files++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries, files
}

// gitAt runs git with the given git directory and work tree.
func gitAt(t *testing.T, gitDir, work string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir=" + gitDir, "--work-tree=" + work}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestKeptCheckoutIsGitsCheckout: the second checkout of a commit is
// written by the host from the tree git wrote the first time, and is that
// tree to the byte (git's line-end conversion included), with the same
// modes, links and gitlink directory; git reads the index the host wrote
// as its own (nothing changed, nothing staged), and the first snapshot of
// the untouched tree reads no file.
func TestKeptCheckoutIsGitsCheckout(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the host writes kept trees on Linux only")
	}
	remote, head := keptSeed(t)
	m := manager(t, repos(t, map[string]workspace.Repo{"acme/app": {URL: remote}}), time.Hour)
	src := workspace.Source{Repository: "acme/app", Branch: "main", Revision: head}
	ctx := context.Background()
	prepare := func(run string) workspace.Paths { return prepareRun(t, m, src, run, nil) }
	byGit := prepare("first")
	if n := workspace.KeptTrees(m); n != 1 {
		t.Fatalf("%d trees kept after the first checkout", n)
	}
	kept := prepare("second")

	want, got := treeOf(t, byGit.Workspace), treeOf(t, kept.Workspace)
	if !strings.Contains(want["a.txt"], "one\r\ntwo\r\n") || !strings.HasPrefix(want["sub"], "d") || !strings.Contains(want["run.sh"], "x") {
		t.Fatalf("git's own checkout is not what the seed meant: %q", want)
	}
	if len(got) != len(want) {
		t.Errorf("kept checkout has %d entries, git's %d", len(got), len(want))
	}
	for path, w := range want {
		if got[path] != w {
			t.Errorf("%s: kept checkout %q, git's %q", path, got[path], w)
		}
	}
	for _, p := range []workspace.Paths{byGit, kept} {
		if b, err := os.ReadFile(filepath.Join(p.Workspace, ".git")); err != nil || !bytes.HasPrefix(b, []byte("gitdir: ")) {
			t.Errorf("%s/.git: %q %v", p.Workspace, b, err)
		}
		if out := gitAt(t, p.Git, p.Workspace, "status", "--porcelain"); out != "" {
			t.Errorf("the agents' git sees changes in %s:\n%s", p.Workspace, out)
		}
		if out := gitAt(t, p.Host, p.Workspace, "diff-index", "--cached", "HEAD"); out != "" {
			t.Errorf("the host's index is not the commit in %s:\n%s", p.Workspace, out)
		}
	}
	if a, b := gitAt(t, byGit.Host, byGit.Workspace, "ls-files", "-s"), gitAt(t, kept.Host, kept.Workspace, "ls-files", "-s"); a != b {
		t.Errorf("the host's indexes differ:\n%s\n%s", a, b)
	}
	snap, err := m.Snapshot(ctx, workspace.Key("tenant", "second"), t.TempDir(), hostileID, "first", workspace.Limits{})
	if err != nil || snap.Changed || snap.Bytes != 0 {
		t.Fatalf("the first snapshot of an untouched kept checkout: %+v %v", snap, err)
	}

	// With no spare ready, the next checkout is written from the kept
	// tree, not by git.
	workspace.DiscardSpares(t, m) // waits for the spare being written from the kept tree
	workspace.SpoilKept(m, "a0", []byte("spoiled\n"))
	if b, err := os.ReadFile(filepath.Join(prepare("third").Workspace, "a0")); err != nil || string(b) != "spoiled\n" {
		t.Fatalf("the third checkout did not come from the kept tree: %q %v", b, err)
	}
}

// TestKeptCheckoutGivesEveryEntry: a checkout written from a kept tree for
// an owner belongs to that UID, every entry of it (the work tree and its
// .git file too), and the first snapshot reads no file; an owner whose UID
// was given back meanwhile fails the prepare, as with git's checkout.
func TestKeptCheckoutGivesEveryEntry(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("giving kept trees to another UID needs Linux and root")
	}
	const uid = 54321
	remote, head := keptSeed(t)
	m := manager(t, repos(t, map[string]workspace.Repo{"acme/app": {URL: remote}}), time.Hour)
	src := workspace.Source{Repository: "acme/app", Branch: "main", Revision: head}
	ctx := context.Background()
	if err := m.Prepare(ctx, workspace.Key("tenant", "first"), src, workspace.Branch("tenant", "first")); err != nil {
		t.Fatal(err)
	}
	key := workspace.Key("tenant", "owned")
	if err := m.PrepareFor(ctx, key, src, workspace.Branch("tenant", "owned"), func() (int, bool) { return uid, true }); err != nil {
		t.Fatal(err)
	}
	p, _ := m.Paths(key)
	if entries, _ := ownedBy(t, p.Workspace, uid); entries < 15 {
		t.Fatalf("walked %d entries", entries)
	}
	snap, err := m.Snapshot(ctx, key, t.TempDir(), hostileID, "first", workspace.Limits{})
	if err != nil || snap.Changed || snap.Bytes != 0 {
		t.Fatalf("the first snapshot of an untouched kept checkout given to its owner: %+v %v", snap, err)
	}

	gone := workspace.Key("tenant", "gone")
	asked := 0
	err = m.PrepareFor(ctx, gone, src, workspace.Branch("tenant", "gone"), func() (int, bool) { asked++; return uid, asked == 1 })
	if !errors.Is(err, workspace.ErrUnavailable) || asked != 2 || m.Prepared(gone, src) {
		t.Fatalf("prepared from a kept tree for a writer gone meanwhile: %v (owner asked %d times)", err, asked)
	}
}
