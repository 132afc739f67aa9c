package workspace

import (
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
)

// Bounds of the kept trees: all of them together, one tree, and one
// tree's entries. A tree past a bound is checked out by git every time.
const (
	keptTreesBytes    = 64 << 20
	keptTreeBytes     = 16 << 20
	keptTreeEntries   = 20_000
	keptEntryOverhead = 128 // what an entry costs beside its bytes and path
)

// keptTrees holds, in memory, work trees exactly as git checked them out
// for a run, by mirror and commit: each entry's index record (mode, object
// id, path), a file's permission bits and bytes, a link's target. A later
// checkout of the same commit from the same mirror is then written by the
// host itself (writeKept): no git process, no object read. A tree is read
// only from a work tree git has just written in a directory no one else
// has written to (keepCheckout's caller guarantees it), and each file
// read must be the inode, times and size git's index recorded. The least
// recently used trees leave first; a kept tree is never changed. Safe for
// concurrent use.
type keptTrees struct {
	limit int // bytes of all trees kept

	mu    sync.Mutex
	trees map[keptKey]*keptTree
	bytes int
	clock uint64
}

// keptKey names a kept tree: the mirror git read it from and the commit.
type keptKey struct{ mirror, commit string }

// keptTree is one commit's work tree, its entries in the git index's
// order (by path, bytewise, so that a directory's entries are together).
type keptTree struct {
	entries []keptEntry
	bytes   int
	used    uint64 // keptTrees.clock at its last use, under keptTrees.mu
}

// keptEntry is one entry of a kept tree.
type keptEntry struct {
	git  gitIndexEntry // mode, object id and path; the stat is not used
	perm os.FileMode   // a file's permission bits as git wrote them
	data []byte        // a file's bytes; a link's target
}

// newKeptTrees returns an empty store of at most limit bytes of trees.
func newKeptTrees(limit int) *keptTrees {
	return &keptTrees{limit: limit, trees: map[keptKey]*keptTree{}}
}

// get returns the tree kept for commit of mirror, or nil.
func (k *keptTrees) get(mirror, commit string) *keptTree {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.trees[keptKey{mirror, commit}]
	if t != nil {
		k.clock++
		t.used = k.clock
	}
	return t
}

// put keeps t for commit of mirror, removing the least recently used
// trees until all fit in its limit (t too, when it alone does not).
func (k *keptTrees) put(mirror, commit string, t *keptTree) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := keptKey{mirror, commit}
	if old := k.trees[key]; old != nil {
		k.bytes -= old.bytes
	}
	k.clock++
	t.used = k.clock
	k.trees[key] = t
	k.bytes += t.bytes
	for k.bytes > k.limit {
		var oldest keptKey
		var at uint64
		for key, t := range k.trees {
			if at == 0 || t.used < at {
				oldest, at = key, t.used
			}
		}
		k.bytes -= k.trees[oldest].bytes
		delete(k.trees, oldest)
	}
}

// readCheckout reads the work tree git has just written at dir from the
// entries of the git index it wrote with it. Each file must be a regular
// file of the inode, times and size the index records, each link a link
// of the inode and times it records; nothing is followed out of dir. It
// fails on anything else, or when the tree passes the bounds of a kept
// tree.
func readCheckout(dir string, entries []gitIndexEntry) (*keptTree, error) {
	if len(entries) > keptTreeEntries {
		return nil, fmt.Errorf("%d entries", len(entries))
	}
	t := &keptTree{entries: make([]keptEntry, 0, len(entries))}
	for _, e := range entries {
		t.bytes += keptEntryOverhead + len(e.path)
		if e.modeString() != modeGitlink {
			t.bytes += int(e.size)
		}
	}
	if t.bytes > keptTreeBytes {
		return nil, fmt.Errorf("%d bytes", t.bytes)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	for _, e := range entries {
		ke := keptEntry{git: e}
		switch e.modeString() {
		case modeFile, modeExec:
			if ke.data, ke.perm, err = readWritten(root, e); err != nil {
				return nil, err
			}
		case modeLink:
			info, err := root.Lstat(e.path)
			if err != nil {
				return nil, err
			}
			if st, ok := info.Sys().(*syscall.Stat_t); !ok || info.Mode()&os.ModeSymlink == 0 || !sameStat(st, e) {
				return nil, fmt.Errorf("%s is not the link git wrote", e.path)
			}
			target, err := root.Readlink(e.path)
			if err != nil {
				return nil, err
			}
			ke.data = []byte(target)
		}
		t.entries = append(t.entries, ke)
	}
	return t, nil
}

// sameStat reports whether st is the stat e records: inode, change and
// modification times (the low 32 bits, as the index keeps them).
func sameStat(st *syscall.Stat_t, e gitIndexEntry) bool {
	return uint32(st.Ino) == e.ino && uint32(st.Ctim.Sec) == e.ctimeSec && uint32(st.Ctim.Nsec) == e.ctimeNsec &&
		uint32(st.Mtim.Sec) == e.mtimeSec && uint32(st.Mtim.Nsec) == e.mtimeNsec
}

// readWritten returns the bytes and permission bits of the regular file
// e names under root, which must be the inode and size e records.
func readWritten(root *os.Root, e gitIndexEntry) ([]byte, os.FileMode, error) {
	f, err := root.OpenFile(e.path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || !info.Mode().IsRegular() || !sameStat(st, e) || info.Size() != int64(e.size) || info.Size() > keptTreeBytes {
		return nil, 0, fmt.Errorf("%s is not the file git wrote", e.path)
	}
	data := make([]byte, info.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, 0, err
	}
	return data, info.Mode().Perm(), nil
}
