// Package gittest builds git repositories for tests: a bare repository
// (the remote a workspace is cloned from and delivered to) seeded with
// commits, one with a large history and a small tree (WriteHistory), and
// readers of what they hold.
package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Remote is a bare repository in a test's temporary directory.
type Remote struct {
	t *testing.T
	// Dir is the bare repository, usable as a clone URL.
	Dir string
	// Commits are the commits Seed made, oldest first.
	Commits []string
	work    string
}

// NewRemote creates a bare repository whose main branch holds one commit
// adding README.md.
func NewRemote(t *testing.T) *Remote {
	t.Helper()
	root := t.TempDir()
	r := &Remote{t: t, Dir: filepath.Join(root, "remote.git"), work: filepath.Join(root, "seed")}
	r.Git(root, "init", "--quiet", "--bare", "--initial-branch=main", r.Dir)
	r.Git(root, "clone", "--quiet", r.Dir, r.work)
	r.Commit("README.md", "# demo\n", "initial")
	r.Git(r.work, "push", "--quiet", "origin", "HEAD:refs/heads/main")
	return r
}

// Commit writes a file in the seed checkout, commits it and returns the
// commit; it is not pushed.
func (r *Remote) Commit(file, content, message string) string {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.work, file), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.Git(r.work, "add", file)
	r.Git(r.work, "commit", "--quiet", "-m", message)
	sha := r.Git(r.work, "rev-parse", "HEAD")
	r.Commits = append(r.Commits, sha)
	return sha
}

// Push pushes the seed checkout's HEAD to ref of the remote.
func (r *Remote) Push(ref string) { r.Git(r.work, "push", "--quiet", "--force", "origin", "HEAD:"+ref) }

// Head is the main commit.
func (r *Remote) Head() string { return r.Commits[0] }

// Show returns `git show <rev>:<path>` in the remote, and whether it exists.
func (r *Remote) Show(rev, path string) (string, bool) {
	out, err := r.command(r.Dir, "show", rev+":"+path).Output()
	return string(out), err == nil
}

// Ref returns the commit ref points at in the remote, or "".
func (r *Remote) Ref(ref string) string {
	out, err := r.command(r.Dir, "rev-parse", "--verify", "--quiet", ref).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// Git runs git in dir and returns its trimmed output; a failure ends the
// test.
func (r *Remote) Git(dir string, args ...string) string {
	r.t.Helper()
	out, err := r.command(dir, args...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *Remote) command(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.invalid", "GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.invalid")
	return cmd
}
