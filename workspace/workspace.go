package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultKeep is how long a finished run's directory stays on disk.
const DefaultKeep = 24 * time.Hour

// Files and directories of a run's directory.
const (
	workspaceDir = "workspace"
	runtimeDir   = "runtime"
	gitDir       = "git"
	// preparedFile records the revision a workspace was checked out at.
	preparedFile = "prepared"
	// finishedFile marks a finished run; its modification time starts
	// the retention period.
	finishedFile = "finished"
	// alternatesFile, under a git directory's objects/info, names the
	// object directories it borrows from.
	alternatesFile = "alternates"
	// gitHomeDir, under the root, is the host's git commands' HOME.
	gitHomeDir = "git-home"
)

// Source is the repository snapshot a run works on.
type Source struct {
	Repository string
	Branch     string
	Revision   string
}

// Paths are the directories of one run.
type Paths struct {
	// Dir is the run's directory, holding the other three.
	Dir string
	// Workspace is where agents work (the checkout, or an empty directory
	// when the host serves no repositories).
	Workspace string
	// Runtime holds the private homes of agent sessions.
	Runtime string
	// Git is the agents' git directory of the checkout, outside the
	// workspace (whose .git file names it): a writer agent may write it,
	// so the host makes it at Prepare and never runs git in it again.
	Git string
	// Host is the host's own git directory of the run (never shown to an
	// agent): the run's branch, the snapshots of the workspace the host
	// made, and its configuration.
	Host string
}

// Manager owns the run directories under one root: Root/<Key>/workspace,
// Root/<Key>/runtime and Root/<Key>/git, and the repositories' mirrors
// their git directories borrow objects from, under Root/mirrors, the
// HOME of the host's git commands, Root/git-home, and the work trees it
// writes ahead, under Root/spares. It is safe for concurrent use.
type Manager struct {
	root    string
	repos   *Repos
	keep    time.Duration
	log     *slog.Logger
	mirrors *mirrors
	kept    *keptTrees
	spares  *spares
	// gitWrites has git write every snapshot's commit, as it does a large
	// one (tests compare the host's commits with git's).
	gitWrites bool

	// ctx ends at Close, which stops the removals waiting for a gate.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	gates  map[string]*Gate
	timers map[string]*time.Timer
	closed bool
}

// NewManager returns a manager of the run directories under root. repos
// may be nil (no repositories: every workspace starts empty). keep is the
// retention of a finished run's directory (0: removed at once).
func NewManager(root string, repos *Repos, keep time.Duration, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{root: root, repos: repos, keep: max(keep, 0), log: log, mirrors: newMirrors(filepath.Join(root, mirrorsDir), log), kept: newKeptTrees(keptTreesBytes), spares: newSpares(filepath.Join(root, sparesDir), log),
		ctx: ctx, cancel: cancel, gates: map[string]*Gate{}, timers: map[string]*time.Timer{}}
}

// Repos is the host's repository file (nil when it serves none).
func (m *Manager) Repos() *Repos { return m.repos }

// Paths returns a run's directories, creating them when missing (the run
// directory and runtime with mode 0700).
func (m *Manager) Paths(key string) (Paths, error) {
	p := m.paths(key)
	if _, err := os.Lstat(p.Dir); os.IsNotExist(err) {
		m.placeRuns(p.Dir)
	}
	for _, d := range []string{p.Dir, p.Runtime, p.Workspace} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return Paths{}, err
		}
	}
	return p, nil
}

// placeRuns makes the root and the tenant directory of the run directory
// dir (mode 0700) and gives each the placement of runs this manager
// keeps. A run creates hundreds of inodes and its removal frees them; on
// ext4 without a journal a new inode is never one freed in the last minute
// or more, and the allocator passes over every such inode of the block
// group for each file it creates. Where finished runs are removed at once
// (no retention), each new run would be written among the inodes the last
// ones just freed (a run's 200-file workspace took 100-190 ms instead of
// 55-80): the directories then carry the hint that runs are unrelated
// (setSpread), and each run goes to block groups of its own. With a
// retention period runs stay beside each other, in groups whose tables
// are in memory, and are not removed while new ones are written there
// (placed apart, the same workspace took 60-180 ms instead of 25-40).
func (m *Manager) placeRuns(dir string) {
	for _, d := range []string{m.root, filepath.Dir(dir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return // Paths says why
		}
		if err := setSpread(d, m.keep == 0); err != nil {
			m.log.Debug("workspace: no placement hint", "dir", d, "err", err)
		}
	}
}

// GitHome returns the directory the host's git commands on run
// directories run in and take as HOME: under the root, made when missing
// (mode 0700), shared by every command (none writes there). It must be
// the server's own empty directory, writable by no one else: git still
// reads a few files under HOME (a user excludes file, .netrc), so a
// directory that is not refuses the command. One directory for all saves
// each command's caller making and removing one of its own: on a file
// system that passes over recently freed inodes for each new one, every
// inode a run's path creates costs.
func (m *Manager) GitHome() (string, error) {
	dir := filepath.Join(m.root, gitHomeDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !info.IsDir() || !ok || int(st.Uid) != os.Geteuid() || info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("git's home %s is not a directory of the server's own that only it may use (mode %v)", dir, info.Mode())
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	if len(names) > 0 {
		return "", fmt.Errorf("git's home %s holds %q: it must stay empty", dir, names[0].Name())
	}
	return dir, nil
}

func (m *Manager) paths(key string) Paths {
	dir := filepath.Join(m.root, filepath.FromSlash(key))
	return Paths{Dir: dir, Workspace: filepath.Join(dir, workspaceDir), Runtime: filepath.Join(dir, runtimeDir), Git: filepath.Join(dir, gitDir),
		Host: filepath.Join(dir, hostGitDir)}
}

// Prepared reports whether this host holds the workspace Prepare made for
// key at src's revision. It creates nothing.
func (m *Manager) Prepared(key string, src Source) bool {
	return prepared(m.paths(key), src)
}

// prepared reports whether p holds a finished checkout at src's
// revision: the prepared marker names it, the host git directory is there
// and so are the object directories it borrows from (all of them written
// by the host, never by an agent).
func prepared(p Paths, src Source) bool {
	b, err := os.ReadFile(filepath.Join(p.Dir, preparedFile))
	if err != nil || strings.TrimSpace(string(b)) != src.Revision {
		return false
	}
	if _, err = os.Stat(filepath.Join(p.Host, "HEAD")); err != nil {
		return false
	}
	alt, err := os.ReadFile(filepath.Join(p.Host, "objects", "info", alternatesFile))
	if os.IsNotExist(err) {
		return true
	}
	for line := range strings.Lines(string(alt)) {
		dir := filepath.FromSlash(strings.TrimSpace(line))
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(p.Host, "objects", dir)
		}
		if _, err := os.Stat(dir); err != nil {
			return false
		}
	}
	return err == nil
}

// Prepare makes the run's workspace a checkout of src's repository at
// exactly src.Revision on branch. The run's git directory holds its own
// refs and index but no history: it borrows the objects of the host's
// mirror of the repository (objects/info/alternates), which is made, or
// fetched, when it lacks the revision; the mirror pins the revision for
// as long as the run's directory exists. A workspace this manager already
// prepared at that revision (before a restart, say) is kept as it is;
// anything else in its place is replaced. A failure that may come from a
// damaged mirror has the mirror checked, and made anew if it is damaged,
// before one more attempt. It holds the run's gate as a writer, so the
// directory is not removed under the checkout. The error wraps
// ErrRevisionNotFound or ErrUnavailable and says what failed.
func (m *Manager) Prepare(ctx context.Context, key string, src Source, branch string) error {
	return m.PrepareFor(ctx, key, src, branch, nil)
}

// errNotGiven is a work tree that could not be given to its owner: the
// mirror is not to blame.
var errNotGiven = errors.New("giving the work tree to the run's writer")

// errRunDir is a run's directory the host could not write: the mirror is
// not to blame.
var errRunDir = errors.New("the run's directory")

// Owner returns the UID a run's new work tree is given to before the host
// records its files' state, and false when it stays the host's. It may
// wait (for a lease being taken meanwhile). It is asked again once the
// tree is given: another answer (the run ended and gave its UID back)
// fails the prepare.
type Owner func() (uid int, ok bool)

// PrepareFor is Prepare, the work tree it writes given to owner's UID
// (when owner is not nil and gives one) before the host records the
// files' state: a run's first snapshot then reads only what its agents
// changed, where a change of owner after that record would have it read
// every file again. Only what the host itself has just written is given:
// no agent has run in the directory yet.
func (m *Manager) PrepareFor(ctx context.Context, key string, src Source, branch string, owner Owner) error {
	repo, ok := m.repos.Lookup(src.Repository)
	if !ok {
		return fmt.Errorf("%w: %s is not listed in the server's --repos file", ErrUnavailable, src.Repository)
	}
	token, ok := repo.Token()
	if !ok {
		return fmt.Errorf("%w: the token variable %s of %s is not set on the server", ErrUnavailable, repo.TokenEnv, src.Repository)
	}
	release, err := m.Gate(key).Acquire(ctx, true)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer release()
	p, err := m.Paths(key)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	marker := filepath.Join(p.Dir, preparedFile)
	if prepared(p, src) {
		return nil
	}
	home, err := m.GitHome()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	remote := Git{Home: home, Token: token, Remote: repo.URL}
	name := mirrorName(src.Repository, repo.URL)
	err = m.checkout(ctx, remote, name, repo.URL, key, p, src.Revision, branch, owner)
	if err != nil && !errors.Is(err, errNotGiven) && !errors.Is(err, errRunDir) && m.mirrors.mayCheck(name, err) {
		if rebuilt, rerr := m.mirrors.repair(ctx, remote, name, repo.URL); rerr != nil {
			m.log.Warn("workspace: cannot check a mirror", "repository", src.Repository, "err", rerr)
		} else if rebuilt {
			err = m.checkout(ctx, remote, name, repo.URL, key, p, src.Revision, branch, owner)
		}
	}
	if err != nil {
		return err
	}
	if err := os.WriteFile(marker, []byte(src.Revision+"\n"), 0o600); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	m.log.InfoContext(ctx, "workspace prepared", "repository", src.Repository, "revision", src.Revision, "branch", branch, "dir", p.Workspace)
	return nil
}

// checkout makes the run's directories, from the objects of mirror name
// of url, hold revision on branch: the host git directory p.Host, the
// work tree p.Workspace written from it, and the agents' git directory
// p.Git, with url as its origin and its index at revision; the work tree
// is given to owner's UID, when it gives one, before the host's index
// records it. Only the commands that reach the remote get remote's token.
func (m *Manager) checkout(ctx context.Context, remote Git, name, url, key string, p Paths, revision, branch string, owner Owner) error {
	for _, d := range []string{p.Workspace, p.Git, p.Host} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	// A revision whose tree is kept was in the mirror when git wrote it:
	// the mirror pins it (the host writes the ref when the mirror still
	// holds the commit, else one git process) while the host writes the
	// tree, and the checkout fails if the pin does. Without a kept tree,
	// git writes the tree from the mirror's objects: the pin comes first.
	var t *keptTree
	if keepsTrees {
		t = m.kept.get(name, revision)
	}
	pin := func() error { return nil }
	if t != nil {
		pinned := make(chan error, 1)
		go func() { pinned <- m.mirrors.borrow(ctx, remote, name, url, revision, runRef(key), true) }()
		pin = sync.OnceValue(func() error { return <-pinned })
	} else if err := m.mirrors.borrow(ctx, remote, name, url, revision, runRef(key), false); err != nil {
		return err
	}
	err := m.checkoutFrom(ctx, remote.Home, t, pin, name, url, p, m.mirrors.objects(name), revision, branch, owner)
	if perr := pin(); perr != nil && !errors.Is(err, errNotGiven) && !errors.Is(err, errRunDir) {
		return perr
	}
	return err
}

// checkoutFrom is checkout with the mirror holding revision (pin returns
// once it is pinned, and how that ended), its objects at objects: from t,
// revision's kept tree (nil: none), else by git once the pin is in place.
func (m *Manager) checkoutFrom(ctx context.Context, home string, t *keptTree, pin func() error, name, url string, p Paths, objects, revision, branch string, owner Owner) error {
	if err := initHostGit(p, objects, revision, branch); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	written := false
	if t != nil {
		var err error
		if written, err = m.checkoutKept(ctx, p, t, name, revision, owner); err != nil {
			return err
		}
	}
	if !written {
		if err := pin(); err != nil {
			return err
		}
		if err := materialise(ctx, home, p, revision); err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		if t == nil {
			t = m.keepCheckout(p, name, revision)
		}
		if owner != nil {
			if uid, ok := owner(); ok {
				if err := giveTree(p.Workspace, uid); err != nil {
					return fmt.Errorf("%w: %w: %v", ErrUnavailable, errNotGiven, err)
				}
				if err := stillOwner(owner, uid); err != nil {
					return err
				}
			}
		}
		m.primeIndex(ctx, home, p, revision)
	}
	// The host's index is the work tree it has just written: the agents'
	// starts as its copy (their HEAD is the same revision).
	if err := initAgentGit(ctx, home, p, objects, url, revision, branch, true); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	// The next checkout of revision takes the spare written meanwhile.
	if t != nil {
		m.spares.want(keptKey{name, revision}, t)
	}
	return nil
}

// stillOwner fails (errNotGiven) unless owner still gives uid: a run that
// ended meanwhile gave its UID back (and another run may hold it now), so
// its tree is not kept.
func stillOwner(owner Owner, uid int) error {
	if again, ok := owner(); !ok || again != uid {
		return fmt.Errorf("%w: %w: the run's writer UID was given back meanwhile", ErrUnavailable, errNotGiven)
	}
	return nil
}

// keepCheckout keeps the work tree git has just written at p.Workspace
// from revision of mirror name (nothing else has written there yet), when
// it fits the bounds, for checkoutKept, and returns it (nil: not kept).
func (m *Manager) keepCheckout(p Paths, name, revision string) *keptTree {
	if !keepsTrees {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(p.Host, "index"))
	if err != nil {
		return nil
	}
	entries, err := parseGitIndex(b)
	if err != nil {
		return nil
	}
	t, err := readCheckout(p.Workspace, entries)
	if err != nil {
		m.log.Debug("workspace: checkout not kept", "revision", revision, "err", err)
		return nil
	}
	m.kept.put(name, revision, t)
	return t
}

// checkoutKept makes the work tree p.Workspace t, the tree kept for
// revision of mirror name: the spare written ahead of it when there is one
// (taken whole, once written), else written now; given to owner's UID when owner gives
// one, with the host's git index and its own index of the tree as given.
// It reports whether it did: after a write that failed (logged; the
// directory is emptied), git writes the tree. It fails when the owner's
// UID was given back meanwhile (errNotGiven) or the work tree cannot be
// emptied after a failed write (errRunDir).
func (m *Manager) checkoutKept(ctx context.Context, p Paths, t *keptTree, name, revision string, owner Owner) (bool, error) {
	uid := -1
	if owner != nil {
		if u, ok := owner(); ok {
			uid = u
		}
	}
	err := emptyDir(p.Workspace)
	var entries []gitIndexEntry
	var stats []fileStat
	if err == nil {
		if sp := m.spares.take(ctx, keptKey{name, revision}); sp != nil {
			if entries, stats, err = takeSpare(p, sp, uid); err != nil {
				m.log.Warn("workspace: a spare work tree was not taken; the kept tree is written", "dir", p.Workspace, "err", err)
				err = emptyDir(p.Workspace)
				entries, stats = nil, nil
			}
		}
	}
	if err == nil && entries == nil {
		entries, stats, err = writeKept(p.Workspace, t, uid)
	}
	if err == nil {
		err = writeNew(filepath.Join(p.Workspace, ".git"), agentGitFile, 0o644)
	}
	if err == nil && uid >= 0 {
		err = os.Lchown(filepath.Join(p.Workspace, ".git"), uid, uid)
	}
	if err == nil {
		err = writeNew(filepath.Join(p.Host, "index"), string(encodeGitIndex(entries)), 0o600)
	}
	if err == nil {
		err = writeIndex(p.Host, statTree(entries, stats, revision), keepEveryStat, readClock())
	}
	if err != nil {
		m.log.Warn("workspace: the kept tree was not written; git writes it", "dir", p.Workspace, "err", err)
		for _, f := range []string{filepath.Join(p.Host, "index"), filepath.Join(p.Host, indexFile)} {
			_ = os.Remove(f)
		}
		if err := emptyDir(p.Workspace); err != nil {
			return false, fmt.Errorf("%w: %w: %v", ErrUnavailable, errRunDir, err)
		}
		return false, nil
	}
	if uid >= 0 {
		return true, stillOwner(owner, uid)
	}
	return true, nil
}

// takeSpare makes the spare sp the work tree p.Workspace (an empty
// directory), given to uid when uid is not negative, and returns its git
// index entries and its regular files' stats as they are then; every
// entry must still be what the host wrote. The spare's own directory is
// removed either way.
func takeSpare(p Paths, sp *spare, uid int) ([]gitIndexEntry, []fileStat, error) {
	defer os.RemoveAll(filepath.Dir(sp.work))
	if err := os.Remove(p.Workspace); err != nil {
		return nil, nil, err
	}
	if err := os.Rename(sp.work, p.Workspace); err != nil {
		return nil, nil, errors.Join(err, os.Mkdir(p.Workspace, 0o700))
	}
	return takeWritten(p.Workspace, sp.entries, sp.stats, uid)
}

// Gate returns the run's workspace gate.
func (m *Manager) Gate(key string) *Gate {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.gates[key]
	if !ok {
		g = newGate()
		m.gates[key] = g
	}
	return g
}

// Finish marks a run finished, making its directory when there is none
// yet (a checkout still to land there finds the mark): the directory is
// removed once the retention period has passed (at once when it is 0), by
// this manager or, after a restart, by Sweep, and never while an execution
// or a Prepare holds the run's gate. Finishing again restarts the
// retention.
func (m *Manager) Finish(key string) {
	p := m.paths(key)
	err := os.MkdirAll(p.Dir, 0o700)
	if err == nil {
		err = os.WriteFile(filepath.Join(p.Dir, finishedFile), nil, 0o600)
	}
	if err != nil {
		m.log.Warn("workspace: cannot mark a finished run", "dir", p.Dir, "err", err)
	}
	m.schedule(key, m.keep)
}

// Sweep schedules the removal of every run directory marked finished,
// when its retention period ends; call it once at startup.
func (m *Manager) Sweep() {
	marks, _ := filepath.Glob(filepath.Join(m.root, "*", "*", finishedFile))
	for _, mark := range marks {
		st, err := os.Stat(mark)
		if err != nil {
			continue
		}
		dir := filepath.Dir(mark)
		key := filepath.Base(filepath.Dir(dir)) + "/" + filepath.Base(dir)
		m.schedule(key, max(time.Until(st.ModTime().Add(m.keep)), 0))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.mirrors.sweep(m.ctx, m.liveRunRefs, m.served)
		}()
	}
}

// liveRunRefs returns the mirror refs of every run whose directory is on
// disk.
func (m *Manager) liveRunRefs() map[string]bool {
	dirs, _ := filepath.Glob(filepath.Join(m.root, "*", "*"))
	live := make(map[string]bool, len(dirs))
	for _, dir := range dirs {
		if parent := filepath.Base(filepath.Dir(dir)); parent != mirrorsDir && parent != sparesDir {
			live[runRef(parent+"/"+filepath.Base(dir))] = true
		}
	}
	return live
}

// served reports whether the repository file still names the mirror.
func (m *Manager) served(name string) bool {
	if m.repos == nil {
		return false
	}
	for repo, r := range m.repos.m {
		if mirrorName(repo, r.URL) == name {
			return true
		}
	}
	return false
}

// schedule starts the removal of the run's directory after the duration,
// at once when it is not positive.
func (m *Manager) schedule(key string, after time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if t, ok := m.timers[key]; ok {
		t.Stop()
		delete(m.timers, key)
	}
	if after <= 0 {
		m.startRemoval(key)
		return
	}
	m.timers[key] = time.AfterFunc(after, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.timers, key)
		if !m.closed {
			m.startRemoval(key)
		}
	})
}

// startRemoval removes the run's directory on its own goroutine; m.mu is
// held.
func (m *Manager) startRemoval(key string) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.remove(key)
	}()
}

// remove waits for the run's gate, as a writer, and removes the run's
// directory; Close stops the wait.
func (m *Manager) remove(key string) {
	gate := m.Gate(key)
	release, err := gate.Acquire(m.ctx, true)
	if err != nil {
		return // closing: Sweep finds the mark again after a restart
	}
	defer release()
	dir := m.paths(key).Dir
	if err := os.RemoveAll(dir); err != nil {
		m.log.Warn("workspace: cannot remove a finished run's directory", "dir", dir, "err", err)
		return
	}
	m.mu.Lock()
	if m.gates[key] == gate {
		delete(m.gates, key)
	}
	m.mu.Unlock()
	m.log.Info("workspace removed", "dir", dir)
	m.mirrors.release(m.ctx, runRef(key), m.served)
}

// Close stops the pending removals and waits for those under way (Sweep
// finds them again after a restart).
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	for k, t := range m.timers {
		t.Stop()
		delete(m.timers, k)
	}
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	m.spares.close()
}
