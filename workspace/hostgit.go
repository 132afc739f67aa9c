package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// hostGitDir, in a run's directory, is the host's own git directory of the
// run: made by the host, never shown to an agent, and the only git
// directory the host runs git in after Prepare. It holds the host's
// configuration, the run's branch (the source revision, then each
// snapshot the host made) and the objects of those snapshots, and borrows
// the rest from the repository's mirror through alternates the host wrote.
const hostGitDir = "host.git"

// hostConfig is the whole configuration of a host git directory: no
// remote, no filter, no hook, no URL rewrite, no include; nothing an agent
// wrote is read.
const hostConfig = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n\tlogallrefupdates = false\n[gc]\n\tauto = 0\n"

// initHostGit makes p.Host anew: a bare repository with hostConfig,
// borrowing the objects directory objects, its branch at revision and
// HEAD on it. The host writes each file itself: the directory is new.
func initHostGit(p Paths, objects, revision, branch string) error {
	if err := os.RemoveAll(p.Host); err != nil {
		return err
	}
	return newGitDir(p.Host, hostConfig, objects, revision, branch)
}

// newGitDir makes dir a new git directory with config as its whole
// configuration, objects as the one directory it borrows objects from,
// refs/heads/branch at revision and HEAD on that branch.
func newGitDir(dir, config, objects, revision, branch string) error {
	ref := filepath.Join(dir, "refs", "heads", filepath.FromSlash(branch))
	for _, d := range []string{filepath.Join(dir, "objects", "info"), filepath.Join(dir, "objects", "pack"), filepath.Join(dir, "refs", "tags"), filepath.Dir(ref)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	for path, body := range map[string]string{filepath.Join(dir, "config"): config, filepath.Join(dir, "HEAD"): "ref: refs/heads/" + branch + "\n", ref: revision + "\n"} {
		if err := writeNew(path, body, 0o600); err != nil {
			return err
		}
	}
	return writeAlternates(dir, objects)
}

// writeAlternates makes objects the one directory the git directory dir
// borrows objects from, named relative to dir's own objects directory so
// that the data directory may move.
func writeAlternates(dir, objects string) error {
	info := filepath.Join(dir, "objects", "info")
	if err := os.MkdirAll(info, 0o700); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Join(dir, "objects"), objects)
	if err != nil {
		rel = objects
	}
	return os.WriteFile(filepath.Join(info, alternatesFile), []byte(filepath.ToSlash(rel)+"\n"), 0o600)
}

// HostGit returns the git commands of the run's host git directory,
// without a work tree, with home as git's HOME (a directory agents cannot
// write). The run's gate must be held.
func (m *Manager) HostGit(key, home string) Git {
	return Git{GitDir: m.paths(key).Host, Home: home}
}

// Head returns the commit the run's branch names in its host git
// directory.
func (m *Manager) Head(ctx context.Context, key, home string) (string, error) {
	_, head, err := readHead(ctx, m.HostGit(key, home), m.paths(key).Host)
	return head, err
}

// SetHead moves the run's branch in its host git directory to commit,
// which the directory must hold.
func (m *Manager) SetHead(ctx context.Context, key, home, commit string) error {
	if !commitIDRE.MatchString(commit) {
		return fmt.Errorf("%q is not a commit id", commit)
	}
	g := m.HostGit(key, home)
	if !hasCommit(ctx, g, commit) {
		return errors.New("the run's git directory lacks commit " + commit)
	}
	_, err := g.Run(ctx, "update-ref", "HEAD", commit)
	return err
}

// MirrorObjects returns the objects directory of the mirror a run of src
// borrows from ("" when the host serves no such repository): the one
// directory of the mirrors an agent's sandbox may show, read-only.
func (m *Manager) MirrorObjects(src Source) string {
	repo, ok := m.repos.Lookup(src.Repository)
	if !ok {
		return ""
	}
	return m.mirrors.objects(mirrorName(src.Repository, repo.URL))
}
