package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Files and refs of the mirrors, kept under Root/mirrors: one bare
// repository per served repository and URL, <name>.git, and its lock file
// <name>.lock.
const (
	mirrorsDir = "mirrors"
	mirrorExt  = ".git"
	lockExt    = ".lock"
	// tmpInfix names a mirror being made (<name>.git.tmp-*): it takes the
	// mirror's name only once its first fetch is complete.
	tmpInfix = ".tmp-"
	// completeFile, inside a mirror, is written once its first fetch
	// finished: a mirror without it is half made and is made again.
	completeFile = "oecp-complete"
	// runRefs holds one ref per run that borrows from the mirror, at the
	// revision the run was prepared at, so that no maintenance of the
	// mirror prunes what a run reads through its alternates.
	runRefs = "refs/oecp/runs/"
	// headsRefspec is what a mirror fetches: every branch, never a tag
	// (and no fetch runs git's maintenance: it runs once what was fetched
	// is pinned).
	// Branches deleted on the remote stay (no --prune): their objects may
	// still be what a run's history names.
	headsRefspec = "+refs/heads/*:refs/heads/*"
)

// notFoundCheckEvery bounds how often a revision a mirror lacks has the
// mirror checked (a damaged mirror can look like one that lacks the
// revision): submits of unknown revisions must not make the host check a
// large mirror each time.
const notFoundCheckEvery = time.Minute

// mirrors is the host's set of per-repository bare mirrors. Every run's
// git directory borrows the objects of its repository's mirror (through
// objects/info/alternates) instead of holding a copy of the history. All
// work on one mirror happens under its lock: a channel within the process
// (so waiting honours ctx) and a flock on its lock file across processes.
type mirrors struct {
	dir string
	log *slog.Logger

	mu      sync.Mutex
	locks   map[string]chan struct{}
	checked map[string]time.Time // the last check after a revision was not found
}

func newMirrors(dir string, log *slog.Logger) *mirrors {
	return &mirrors{dir: dir, log: log, locks: map[string]chan struct{}{}, checked: map[string]time.Time{}}
}

// mayCheck reports whether a failure err to make a workspace from the
// mirror name should have the mirror checked: always, unless the
// revision was not found and the mirror was checked for that reason less
// than notFoundCheckEvery ago.
func (ms *mirrors) mayCheck(name string, err error) bool {
	if !errors.Is(err, ErrRevisionNotFound) {
		return true
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if last, ok := ms.checked[name]; ok && time.Since(last) < notFoundCheckEvery {
		return false
	}
	ms.checked[name] = time.Now()
	return true
}

// mirrorName names the mirror of repository repo fetched from url: a new
// URL for the same repository gets a new mirror.
func mirrorName(repo, url string) string {
	sum := sha256.Sum256([]byte(repo + "\x00" + url))
	return hex.EncodeToString(sum[:8])
}

// runRef is the ref that pins, in a mirror, what the run with directory
// key borrows.
func runRef(key string) string {
	sum := sha256.Sum256([]byte(key))
	return runRefs + hex.EncodeToString(sum[:16])
}

func (ms *mirrors) path(name string) string { return filepath.Join(ms.dir, name+mirrorExt) }

// lock takes the mirror's lock and returns its release. A free lock is
// taken even when ctx has ended: only waiting honours ctx.
func (ms *mirrors) lock(ctx context.Context, name string) (func(), error) {
	ms.mu.Lock()
	ch, ok := ms.locks[name]
	if !ok {
		ch = make(chan struct{}, 1)
		ms.locks[name] = ch
	}
	ms.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
		select {
		case ch <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	err := os.MkdirAll(ms.dir, 0o700)
	var unlock func()
	if err == nil {
		unlock, err = lockFile(filepath.Join(ms.dir, name+lockExt))
	}
	if err != nil {
		<-ch
		return nil, err
	}
	return func() { unlock(); <-ch }, nil
}

// complete reports whether the mirror at dir finished its first fetch.
func complete(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, completeFile))
	return err == nil
}

// hasCommit reports whether the repository g runs in holds the commit rev.
func hasCommit(ctx context.Context, g Git, rev string) bool {
	code, err := g.Status(ctx, "cat-file", "-e", rev+"^{commit}")
	return err == nil && code == 0
}

// objects is the objects directory of mirror name.
func (ms *mirrors) objects(name string) string { return filepath.Join(ms.path(name), "objects") }

// borrow makes sure the mirror of url holds revision (making the mirror,
// or fetching its branches and then the revision itself, as needed) and
// pins the revision with ref. known says git already resolved revision
// from this mirror to a commit: its tree is kept (pinKnown). remote
// carries the token; only the fetches get it.
func (ms *mirrors) borrow(ctx context.Context, remote Git, name, url, revision, ref string, known bool) error {
	unlock, err := ms.lock(ctx, name)
	if err != nil {
		return fmt.Errorf("%w: mirror lock: %v", ErrUnavailable, err)
	}
	defer unlock()
	dir := ms.path(name)
	if !complete(dir) {
		pins, err := readRunRefs(dir) // of a half-made mirror's runs
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		if err := ms.create(ctx, remote, url, name, pins); err != nil {
			return err
		}
	}
	if known && pinKnown(dir, ref, revision) {
		return nil
	}
	g := Git{Dir: dir, Home: remote.Home}
	// One git process pins a revision the mirror holds: the ref's new
	// value is revision peeled to a commit, which fails for anything else.
	if _, err := g.Run(ctx, "update-ref", ref, revision+"^{commit}"); err == nil {
		return nil
	}
	if !hasCommit(ctx, g, revision) {
		fetch := remote
		fetch.Dir = dir
		if _, err := fetch.Run(ctx, "fetch", "--quiet", "--no-tags", "--no-auto-gc", "--", url, headsRefspec); err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		if !hasCommit(ctx, g, revision) {
			// Not on a branch: ask for the commit itself.
			_, _ = fetch.Run(ctx, "fetch", "--quiet", "--no-tags", "--no-auto-gc", "--", url, revision)
		}
		if !hasCommit(ctx, g, revision) {
			return fmt.Errorf("%w: %s is not a commit of the repository", ErrRevisionNotFound, revision)
		}
		if _, err := g.Run(ctx, "update-ref", ref, revision); err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		// Maintenance runs under the lock, once the revision is pinned.
		if _, err := g.Run(ctx, "gc", "--auto", "--quiet"); err != nil {
			ms.log.Warn("workspace: mirror maintenance failed", "mirror", name, "err", err)
		}
	} else if _, err := g.Run(ctx, "update-ref", ref, revision); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// create makes the mirror of url anew, beside the old one if there is
// one: a bare repository holding every branch and the pinned revisions
// pins (ref → revision) that the remote still has, pinned again; once
// complete it takes the mirror's name, replacing the old one. The mirror's
// lock is held.
func (ms *mirrors) create(ctx context.Context, remote Git, url, name string, pins map[string]string) error {
	tmp, err := os.MkdirTemp(ms.dir, name+mirrorExt+tmpInfix)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer os.RemoveAll(tmp)
	local := Git{Home: remote.Home}
	if _, err := local.Run(ctx, "init", "--quiet", "--bare", "--template=", tmp); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	local.Dir = tmp
	// Maintenance runs in the foreground, under the mirror's lock.
	if _, err := local.Run(ctx, "config", "gc.autoDetach", "false"); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	fetch := remote
	fetch.Dir = tmp
	if _, err := fetch.Run(ctx, "fetch", "--quiet", "--no-tags", "--no-auto-gc", "--", url, headsRefspec); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	for ref, rev := range pins {
		if !hasCommit(ctx, local, rev) {
			_, _ = fetch.Run(ctx, "fetch", "--quiet", "--no-tags", "--no-auto-gc", "--", url, rev)
		}
		if !hasCommit(ctx, local, rev) {
			ms.log.Warn("workspace: a run's revision is gone from the repository and its mirror", "mirror", name, "revision", rev)
			continue
		}
		if _, err := local.Run(ctx, "update-ref", ref, rev); err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, completeFile), nil, 0o600); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	final := ms.path(name)
	old := final + tmpInfix + "old"
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err := os.Rename(final, old); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err := os.RemoveAll(old); err != nil {
		ms.log.Warn("workspace: cannot remove a replaced mirror", "dir", old, "err", err)
	}
	ms.log.Info("workspace: mirror fetched", "mirror", name, "pinned", len(pins))
	return nil
}

// repair checks the connectivity of the mirror (git fsck) after a
// failure to make a workspace from it; a damaged or half-made mirror is
// made anew, keeping the revisions its runs pin. It reports whether it
// made the mirror anew.
func (ms *mirrors) repair(ctx context.Context, remote Git, name, url string) (bool, error) {
	unlock, err := ms.lock(ctx, name)
	if err != nil {
		return false, err
	}
	defer unlock()
	dir := ms.path(name)
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return false, nil // never made: its first fetch failed and said why
	}
	if complete(dir) {
		code, err := (Git{Dir: dir, Home: remote.Home}).Status(ctx, "fsck", "--connectivity-only", "--no-dangling", "--no-progress")
		if err != nil || code == 0 {
			return false, err
		}
	}
	pins, err := readRunRefs(dir)
	if err != nil && !os.IsNotExist(err) {
		return false, err
	}
	ms.log.Warn("workspace: mirror damaged or incomplete, fetching it again", "mirror", name)
	return true, ms.create(ctx, remote, url, name, pins)
}

// readRunRefs returns the run refs of the mirror at dir (ref → revision),
// read from the files themselves: git skips refs whose objects are
// missing, and a damaged mirror must keep them.
func readRunRefs(dir string) (map[string]string, error) {
	refs := map[string]string{}
	packed, err := os.ReadFile(filepath.Join(dir, "packed-refs"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for line := range strings.Lines(string(packed)) {
		rev, ref, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && strings.HasPrefix(ref, runRefs) && shaRE.MatchString(rev) {
			refs[ref] = rev
		}
	}
	loose, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(runRefs)))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for _, e := range loose {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(runRefs), e.Name()))
		if rev := strings.TrimSpace(string(b)); err == nil && shaRE.MatchString(rev) {
			refs[runRefs+e.Name()] = rev
		}
	}
	return refs, nil
}
