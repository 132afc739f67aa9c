// Package diskusage measures what directory trees take on disk, the
// blocks really allocated, by a walk that follows no link, leaves no
// root's filesystem and is bounded in the entries it visits and the depth
// it descends: trees an agent wrote are measured without being trusted.
package diskusage

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// MaxEntries bounds the entries (files, directories, links) one
// measurement visits. Directories holding more are over the limit: a walk
// must stay bounded, and so must the inodes an agent takes.
const MaxEntries = 1 << 21

// MaxDepth bounds how deep one measurement descends. A deeper tree is
// over the limit: what the walk cannot reach it cannot bound.
const MaxDepth = 256

// readBatch is how many entries of a directory are read at once.
const readBatch = 1024

// blockSize is the unit of st_blocks.
const blockSize = 512

// Why a tree is over a limit without its bytes being, and a stopped
// measurement.
var (
	ErrTooManyEntries = fmt.Errorf("more than %d files and directories", MaxEntries)
	ErrTooDeep        = fmt.Errorf("directories nested deeper than %d", MaxDepth)
	ErrStopped        = errors.New("measurement stopped")
)

// Measure measures what the trees at roots take on disk: the blocks
// really allocated (st_blocks), without following links or leaving each
// root's filesystem, a file of several links counted once. It stops early
// once the total is over limit (then the total is a lower bound), and
// when stop is closed (ErrStopped). A tree over MaxEntries or
// MaxDepth yields ErrTooManyEntries or ErrTooDeep. A missing root, and
// an entry that vanishes or that the server may not read, count nothing.
func Measure(roots []string, limit int64, stop <-chan struct{}) (int64, error) {
	return measure(roots, limit, stop, MaxEntries)
}

// measure is Measure with maxEntries in place of MaxEntries.
func measure(roots []string, limit int64, stop <-chan struct{}, maxEntries int) (int64, error) {
	w := &diskWalk{limit: limit, stop: stop, maxEntries: maxEntries, seen: map[[2]uint64]bool{}}
	for _, root := range roots {
		if root == "" {
			continue
		}
		fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			continue
		}
		w.dev = st.Dev
		w.add(&st)
		if err := w.dir(fd, root, 0); err != nil || w.bytes > limit {
			return w.bytes, err
		}
	}
	return w.bytes, nil
}

// diskWalk is one measurement in progress.
type diskWalk struct {
	limit      int64
	stop       <-chan struct{}
	maxEntries int
	dev        uint64 // the current root's filesystem
	bytes      int64
	entries    int
	seen       map[[2]uint64]bool // (dev, inode) of files with several links
}

func (w *diskWalk) add(st *unix.Stat_t) {
	if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		key := [2]uint64{st.Dev, st.Ino}
		if w.seen[key] {
			return
		}
		w.seen[key] = true
	}
	w.bytes += st.Blocks * blockSize
}

// dir measures the entries of the directory open at fd (which it
// closes), then descends into its subdirectories, each opened relative to
// it without following a link: an agent that swaps a directory for a link
// meanwhile gets the link measured, never its target.
func (w *diskWalk) dir(fd int, name string, depth int) error {
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var subdirs []string
	for {
		select {
		case <-w.stop:
			return ErrStopped
		default:
		}
		ents, err := f.ReadDir(readBatch)
		for _, e := range ents {
			if w.entries++; w.entries > w.maxEntries {
				return ErrTooManyEntries
			}
			var st unix.Stat_t
			if unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			w.add(&st)
			if w.bytes > w.limit {
				return nil
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Dev == w.dev {
				subdirs = append(subdirs, e.Name())
			}
		}
		if err != nil || len(ents) == 0 { // io.EOF, or a directory that went away
			break
		}
	}
	if len(subdirs) > 0 && depth >= MaxDepth {
		return ErrTooDeep
	}
	for _, s := range subdirs {
		sub, err := unix.Openat(fd, s, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if err := w.dir(sub, s, depth+1); err != nil || w.bytes > w.limit {
			return err
		}
	}
	return nil
}
