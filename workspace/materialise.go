package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// agentGitFile is the content of the workspace's .git file: it names the
// agents' git directory relative to itself, so that the data directory
// may move.
const agentGitFile = "gitdir: ../" + gitDir + "\n"

// materialise makes the work tree p.Workspace exactly commit's tree, from
// the host git directory: whatever the work tree held is removed first
// (links removed, never followed), so git writes into directories the host
// just made, with the host's index and configuration. The workspace's
// .git file names the agents' git directory. Git writes the files with
// checkoutWorkers processes at once: a new file costs its inode more than
// its bytes, and the waits of several overlap.
func materialise(ctx context.Context, home string, p Paths, commit string) error {
	if err := emptyDir(p.Workspace); err != nil {
		return err
	}
	g := Git{GitDir: p.Host, Dir: p.Workspace, Home: home}
	if _, err := g.Run(ctx, "-c", "checkout.workers="+strconv.Itoa(checkoutWorkers()), "read-tree", "-u", "--reset", commit); err != nil {
		return err
	}
	return writeNew(filepath.Join(p.Workspace, ".git"), agentGitFile, 0o644)
}

// checkoutWorkers is how many processes git writes a work tree with: the
// host's CPUs, at least two and at most eight (git writes a tree of fewer
// than 100 files with one).
func checkoutWorkers() int { return min(max(runtime.NumCPU(), 2), 8) }

// giveTree gives every entry of the work tree at dir, dir too, to uid
// (its group too), not following links. It is for a tree the host has
// just written: nothing else has run in it.
func giveTree(dir string, uid int) error {
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, uid)
	})
}

// emptyDir makes dir an empty directory (mode 0700 when it is made),
// removing what it holds without following a link.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, n.Name())))
	}
	return errors.Join(errs...)
}

// writeNew writes a file that must not exist yet: never through a link
// left in its place.
func writeNew(path, content string, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	return errors.Join(err, f.Close())
}

// initAgentGit makes the agents' git directory p.Git anew, for the work
// tree p.Workspace: borrowing objects, with url as its origin and branch
// at revision checked out; its index is a copy of the host's (copyIndex:
// the host's index is revision's tree as just written) or revision's tree
// (the work tree's differences from it show as changes). The host never
// runs git there after this.
func initAgentGit(ctx context.Context, home string, p Paths, objects, url, revision, branch string, copyIndex bool) error {
	if err := os.RemoveAll(p.Git); err != nil {
		return err
	}
	config := "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n" +
		"[remote \"origin\"]\n\turl = " + configValue(url) + "\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
	if err := newGitDir(p.Git, config, objects, revision, branch); err != nil {
		return err
	}
	if copyIndex {
		index, err := os.ReadFile(filepath.Join(p.Host, "index"))
		if err == nil {
			return writeNew(filepath.Join(p.Git, "index"), string(index), 0o600)
		}
	}
	if _, err := (Git{GitDir: p.Git, Home: home}).Run(ctx, "read-tree", revision); err != nil {
		return fmt.Errorf("the agents' index: %w", err)
	}
	return nil
}

// configValue quotes s as a git configuration value.
func configValue(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

// Reset makes the run's work tree exactly commit's tree, from the host git
// directory, with the run's branch there at commit, and makes the agents'
// git directory anew at src's revision (what the run changed shows there
// as changes). commit must be in the host git directory. The run's gate
// must be held; the workspace must have been prepared.
func (m *Manager) Reset(ctx context.Context, key, home string, src Source, branch, commit string) error {
	repo, ok := m.repos.Lookup(src.Repository)
	if !ok {
		return fmt.Errorf("%w: %s is not listed in the server's --repos file", ErrUnavailable, src.Repository)
	}
	p := m.paths(key)
	if err := m.SetHead(ctx, key, home, commit); err != nil {
		return err
	}
	restore := m.setIgnoredAside(ctx, home, p, commit)
	err := materialise(ctx, home, p, commit)
	restore()
	if err != nil {
		return err
	}
	m.primeIndex(ctx, home, p, commit)
	return initAgentGit(ctx, home, p, m.MirrorObjects(src), repo.URL, src.Revision, branch, commit == src.Revision)
}

// asideDir, in a run's directory, holds the work tree's ignored entries
// while Reset writes the work tree anew.
const asideDir = "aside"

// setIgnoredAside moves the entries of the work tree that commit does not
// record and its ignore files leave out (dependencies, build output) into
// the run's directory, by rename, and returns what puts them back once the
// work tree is written anew: each into its place, unless commit records
// that place. Nested repositories are not kept; a work tree past the
// snapshot bounds keeps nothing. Nothing is followed or read: entries are
// only renamed.
func (m *Manager) setIgnoredAside(ctx context.Context, home string, p Paths, commit string) func() {
	aside := filepath.Join(p.Dir, asideDir)
	none := func() { _ = os.RemoveAll(aside) }
	if err := emptyDir(aside); err != nil {
		m.log.Warn("workspace: ignored files are not kept", "dir", p.Dir, "err", err)
		return none
	}
	g := Git{GitDir: p.Host, Home: home}
	tr, err := listTree(ctx, g, commit)
	if err != nil {
		m.log.Warn("workspace: ignored files are not kept", "dir", p.Dir, "err", err)
		return none
	}
	root, err := os.OpenRoot(p.Workspace)
	if err != nil {
		return none
	}
	defer root.Close()
	_, left, err := walk(ctx, root, Git{GitDir: p.Host, Dir: p.Workspace, Home: home}, tr, Limits{}.orDefaults(), true)
	if err != nil {
		m.log.Warn("workspace: ignored files are not kept", "dir", p.Dir, "err", err)
		return none
	}
	var moved []string
	for i, rel := range left {
		if err := os.Rename(filepath.Join(p.Workspace, filepath.FromSlash(rel)), filepath.Join(aside, strconv.Itoa(i))); err == nil {
			moved = append(moved, rel)
		} else {
			moved = append(moved, "")
		}
	}
	return func() {
		defer none()
		for i, rel := range moved {
			if rel == "" {
				continue
			}
			dst := filepath.Join(p.Workspace, filepath.FromSlash(rel))
			if _, err := os.Lstat(dst); err == nil {
				continue // the commit records it
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				continue
			}
			_ = os.Rename(filepath.Join(aside, strconv.Itoa(i)), dst)
		}
	}
}
