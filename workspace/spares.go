package workspace

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// sparesDir, under the manager's root, holds work trees written ahead.
const sparesDir = "spares"

// Bounds of the spares: how many at once (one per mirror and commit), how
// long one waits to be taken before it is removed, and the age past which
// another process's leftover directory is removed.
const (
	maxSpares     = 4
	spareIdle     = 10 * time.Minute
	spareLeftover = time.Hour
)

// spares are work trees the host writes ahead, from kept trees: once a
// run has checked out a commit, the host writes that commit's tree again
// in the background, so that the next checkout of that commit takes a
// whole tree at once (a rename) instead of writing it while its run
// waits. A checkout that comes while its spare is still being written
// waits for it, rather than write a second tree beside it that the
// first would slow down: the rest of a write begun earlier takes less
// than a whole one. Only one checkout waits for a spare; others of the
// same commit meanwhile write their own. They live in
// a directory of this process's own under Root/spares, which only the
// host writes and no agent is shown; each is written once and not
// changed until one checkout takes it (and gives it to its run's writer
// where it lands). Safe for concurrent use.
type spares struct {
	root string // Root/spares
	log  *slog.Logger

	// dirMu is held while this process's directory under root is looked
	// for or made (and other processes' old ones removed).
	dirMu sync.Mutex
	dir   string

	mu     sync.Mutex
	made   map[keptKey]*spare
	clock  uint64
	closed bool
	wg     sync.WaitGroup

	// Test hooks, set before the first spare is wanted: beforeWrite runs
	// on a spare's goroutine before it writes, written once it has
	// written the work tree work (before a checkout may take it), waiting
	// once a checkout has begun to wait for a spare.
	beforeWrite, waiting func()
	written              func(work string)
}

// spare is one work tree written ahead.
type spare struct {
	done chan struct{} // closed once written or failed
	// Set before done is closed.
	work    string          // the work tree
	entries []gitIndexEntry // the git index of what was written
	stats   []fileStat      // each regular file's stat, entries' order
	err     error
	// Under spares.mu.
	used    uint64
	timer   *time.Timer
	claimed bool // a checkout waits for it
}

func newSpares(root string, log *slog.Logger) *spares {
	return &spares{root: root, log: log, made: map[keptKey]*spare{}}
}

// want starts writing a spare of t for key unless there is one (being
// written or ready), the least recently wanted ready spare removed first
// when there are maxSpares.
func (s *spares) want(key keptKey, t *keptTree) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	if sp := s.made[key]; sp != nil || s.closed {
		if sp != nil {
			sp.used = s.clock
		}
		return
	}
	if len(s.made) >= maxSpares && !s.dropOldest() {
		return
	}
	sp := &spare{done: make(chan struct{}), used: s.clock}
	s.made[key] = sp
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(sp.done)
		if s.beforeWrite != nil {
			s.beforeWrite()
		}
		dir, err := s.ownDir()
		if err == nil {
			sp.work, sp.entries, sp.stats, err = writeSpare(dir, t)
		}
		if err == nil && s.written != nil {
			s.written(sp.work)
		}
		sp.err = err
		if sp.err != nil {
			s.log.Warn("workspace: a spare work tree was not written", "err", sp.err)
			s.mu.Lock()
			if s.made[key] == sp {
				delete(s.made, key)
			}
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		mine := s.made[key] == sp
		if mine {
			sp.timer = time.AfterFunc(spareIdle, func() { s.drop(key, sp) })
		}
		s.mu.Unlock()
		if !mine { // dropped meanwhile
			_ = os.RemoveAll(filepath.Dir(sp.work))
		}
	}()
}

// ownDir returns this process's directory of spares, making it when it
// is missing (the first time, or removed meanwhile), and then removing
// what other processes left there more than spareLeftover ago: a live
// process's directory changes whenever it writes a spare, and a spare
// lives at most spareIdle, so an older one holds none.
func (s *spares) ownDir() (string, error) {
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	if s.dir != "" {
		if _, err := os.Lstat(s.dir); err == nil {
			return s.dir, nil
		}
	}
	if err := os.MkdirAll(s.root, 0o700); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(s.root, strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", err
	}
	s.dir = dir
	if old, err := os.ReadDir(s.root); err == nil {
		for _, d := range old {
			if info, err := d.Info(); err == nil && time.Since(info.ModTime()) > spareLeftover {
				_ = os.RemoveAll(filepath.Join(s.root, d.Name()))
			}
		}
	}
	return dir, nil
}

// writeSpare writes t as a new work tree in a directory of its own under
// dir, owned by the host.
func writeSpare(dir string, t *keptTree) (string, []gitIndexEntry, []fileStat, error) {
	own, err := os.MkdirTemp(dir, "")
	if err != nil {
		return "", nil, nil, err
	}
	work := filepath.Join(own, "workspace")
	if err := os.Mkdir(work, 0o700); err != nil {
		_ = os.RemoveAll(own)
		return "", nil, nil, err
	}
	entries, stats, err := writeKept(work, t, -1)
	if err != nil {
		_ = os.RemoveAll(own)
		return "", nil, nil, err
	}
	return work, entries, stats, nil
}

// dropOldest removes the least recently wanted spare that is written,
// and reports whether there was one. s.mu is held.
func (s *spares) dropOldest() bool {
	var oldest keptKey
	var at *spare
	for key, sp := range s.made {
		select {
		case <-sp.done:
		default:
			continue
		}
		if sp.claimed {
			continue
		}
		if at == nil || sp.used < at.used {
			oldest, at = key, sp
		}
	}
	if at == nil {
		return false
	}
	s.removeLocked(oldest, at)
	return true
}

// drop removes sp, when it is still key's spare.
func (s *spares) drop(key keptKey, sp *spare) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.made[key] == sp {
		s.removeLocked(key, sp)
	}
}

// removeLocked forgets key's spare sp (written) and removes its files on
// a goroutine of their own. s.mu is held.
func (s *spares) removeLocked(key keptKey, sp *spare) {
	delete(s.made, key)
	if sp.timer != nil {
		sp.timer.Stop()
	}
	if sp.work == "" {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = os.RemoveAll(filepath.Dir(sp.work))
	}()
}

// take returns key's spare once it is written, and forgets it: the
// caller owns its files and removes what it does not keep. A spare still
// being written is waited for (until ctx ends), unless another checkout
// already waits for it. It returns nil when there is none, it failed, it
// was removed meanwhile (the manager closing), or another checkout has
// it.
func (s *spares) take(ctx context.Context, key keptKey) *spare {
	s.mu.Lock()
	sp := s.made[key]
	if sp == nil || sp.claimed {
		s.mu.Unlock()
		return nil
	}
	sp.claimed = true
	s.mu.Unlock()
	select {
	case <-sp.done:
	default:
		if s.waiting != nil {
			s.waiting()
		}
		select {
		case <-sp.done:
		case <-ctx.Done():
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-sp.done:
	default: // ctx ended first: the spare stays for the next checkout
		sp.claimed = false
		return nil
	}
	if sp.err != nil || s.made[key] != sp {
		return nil
	}
	delete(s.made, key)
	if sp.timer != nil {
		sp.timer.Stop()
	}
	return sp
}

// close stops making spares, waits for those being written, removes
// those not taken and then this process's directory of them when it is
// empty: a spare taken meanwhile is its taker's to remove.
func (s *spares) close() {
	s.mu.Lock()
	s.closed = true
	writing := make([]*spare, 0, len(s.made))
	for _, sp := range s.made {
		writing = append(writing, sp)
	}
	s.mu.Unlock()
	for _, sp := range writing {
		<-sp.done
	}
	s.mu.Lock()
	for key, sp := range s.made {
		s.removeLocked(key, sp)
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	if s.dir != "" {
		_ = os.Remove(s.dir)
	}
}
