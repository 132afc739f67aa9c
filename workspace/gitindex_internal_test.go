package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gitIn runs git in dir as the host runs it, with an identity to commit.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	args = append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)
	out, err := Git{Dir: dir, Home: t.TempDir()}.Run(context.Background(), args...)
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(out)
}

// TestGitIndexIsTheTree: the tree read from the git index that wrote a
// work tree is the tree git lists (files, executables, links, gitlinks,
// every length of path the entries' padding depends on), in index
// versions 2 and 3; version 4 and a damaged index are refused, so the
// host asks git instead.
func TestGitIndexIsTheTree(t *testing.T) {
	repo := t.TempDir()
	gitIn(t, repo, "init", "--quiet")
	files := map[string]string{"a": "a\n", "sp ace/ü.txt": "u\n", "d1/d2/deep.txt": "deep\n"}
	for n := 1; n <= 17; n++ {
		files["len/"+strings.Repeat("x", n)] = strings.Repeat("y", n)
	}
	for name, body := range files {
		p := filepath.Join(repo, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "run.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d1/d2/deep.txt", filepath.Join(repo, "link")); err != nil {
		t.Fatal(err)
	}
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("ab", 20)+",mods/sub")
	gitIn(t, repo, "commit", "--quiet", "-m", "tree")
	head := gitIn(t, repo, "rev-parse", "HEAD")
	dir := filepath.Join(repo, ".git")
	want, err := listTree(context.Background(), Git{GitDir: dir, Home: t.TempDir()}, head)
	if err != nil {
		t.Fatal(err)
	}
	same := func(version string) {
		t.Helper()
		got, err := readGitIndex(dir, head)
		if err != nil {
			t.Fatalf("version %s: %v", version, err)
		}
		if len(got.entries) != len(want.entries) || got.commit != head {
			t.Fatalf("version %s: %d entries of %s, want %d", version, len(got.entries), got.commit, len(want.entries))
		}
		for p, w := range want.entries {
			g, ok := got.entries[p]
			if !ok || g.mode != w.mode || (w.mode != modeDir && g.oid != w.oid) {
				t.Errorf("version %s: %q is %+v, want %+v", version, p, g, w)
			}
		}
	}
	same("2")
	gitIn(t, repo, "update-index", "--index-version", "3")
	gitIn(t, repo, "update-index", "--skip-worktree", "a") // an extended flag
	same("3")
	gitIn(t, repo, "update-index", "--index-version", "4")
	if _, err := readGitIndex(dir, head); !errors.Is(err, errGitIndex) {
		t.Fatalf("version 4: %v", err)
	}
	gitIn(t, repo, "update-index", "--index-version", "2")
	b, err := os.ReadFile(filepath.Join(dir, "index"))
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 1
	if err := os.WriteFile(filepath.Join(dir, "index"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readGitIndex(dir, head); !errors.Is(err, errGitIndex) {
		t.Fatalf("a damaged index: %v", err)
	}
}
