package workspace

import (
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// keepsTrees reports whether this system writes kept trees.
const keepsTrees = true

// writeKept writes t into the empty directory dir, which the host has
// just made: every directory and file new (O_EXCL), each opened from its
// parent's descriptor with no link followed, and given to uid (its group
// too) as it is made when uid is not negative, dir itself included. It
// returns t's git index entries with the stat of what it wrote, in t's
// order, and each regular file's full stat (zero for the others). A
// failure leaves a partial tree for the caller to remove.
func writeKept(dir string, t *keptTree, uid int) ([]gitIndexEntry, []fileStat, error) {
	entries := make([]gitIndexEntry, len(t.entries))
	for i, e := range t.entries {
		entries[i] = e.git
	}
	return walkTree(dir, entries, uid, true, func(at int, name string, i int, st *unix.Stat_t) error {
		e := t.entries[i]
		switch e.git.modeString() {
		case modeFile, modeExec:
			return writeFileAt(at, name, e.data, uint32(e.perm), uid, st)
		case modeLink:
			err := unix.Symlinkat(string(e.data), at, name)
			if err == nil && uid >= 0 {
				err = unix.Fchownat(at, name, uid, uid, unix.AT_SYMLINK_NOFOLLOW)
			}
			if err == nil {
				err = unix.Fstatat(at, name, st, unix.AT_SYMLINK_NOFOLLOW)
			}
			return err
		case modeGitlink:
			// git makes a gitlink's directory and records no stat of it.
			fd, err := mkdirOpen(at, name)
			if err == nil {
				if uid >= 0 {
					err = unix.Fchown(fd, uid, uid)
				}
				unix.Close(fd)
			}
			return err
		}
		return fmt.Errorf("mode %s", e.git.modeString())
	})
}

// takeWritten takes the tree the host wrote at dir from entries (with
// writeKept, into a directory no one else has written to since) as the
// run's: each entry is given to uid (its group too) when uid is not
// negative, dir itself and every directory included, following no link,
// and must still be what was written (stats the stat it had then, for a
// regular file; entries' own for the others: inode, size, modification
// time, and change time unless it was given). It returns entries and the
// regular files' stats as they are once given.
func takeWritten(dir string, entries []gitIndexEntry, stats []fileStat, uid int) ([]gitIndexEntry, []fileStat, error) {
	return walkTree(dir, entries, uid, false, func(at int, name string, i int, st *unix.Stat_t) error {
		e := entries[i]
		if uid >= 0 {
			if err := unix.Fchownat(at, name, uid, uid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
		}
		if err := unix.Fstatat(at, name, st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		same := uint32(st.Ino) == e.ino && uint32(st.Size) == e.size && uint32(st.Mtim.Sec) == e.mtimeSec && uint32(st.Mtim.Nsec) == e.mtimeNsec &&
			(uid >= 0 || uint32(st.Ctim.Sec) == e.ctimeSec && uint32(st.Ctim.Nsec) == e.ctimeNsec)
		switch mode := e.modeString(); mode {
		case modeFile, modeExec:
			was := stats[i]
			same = st.Mode&unix.S_IFMT == unix.S_IFREG && int64(st.Ino) == was.ino && st.Size == was.size && st.Mtim.Nano() == was.mtime &&
				(uid >= 0 || st.Ctim.Nano() == was.ctime)
		case modeLink:
			same = same && st.Mode&unix.S_IFMT == unix.S_IFLNK
		case modeGitlink:
			same = st.Mode&unix.S_IFMT == unix.S_IFDIR
		}
		if !same {
			return fmt.Errorf("not as the host wrote it")
		}
		return nil
	})
}

// walkTree calls entry for each of entries (sorted by path, bytewise, as
// a git index keeps them: a directory's entries are together) with the
// descriptor of its directory under dir, its name there, its position and
// the stat to fill. The directories leading to the entries are made
// (create) or opened, with no link followed, and given to uid when it is
// not negative, dir itself included. It returns entries with the stats
// entry filled (none for a gitlink) and each regular file's full stat.
func walkTree(dir string, entries []gitIndexEntry, uid int, create bool, entry func(at int, name string, i int, st *unix.Stat_t) error) ([]gitIndexEntry, []fileStat, error) {
	top, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", dir, err)
	}
	// open is the directories from dir down to the one of the entry at
	// hand: their paths relative to dir ("" is dir) and descriptors. A
	// directory left is never entered again.
	type opened struct {
		path string
		fd   int
	}
	open := []opened{{"", top}}
	defer func() {
		for _, o := range open {
			unix.Close(o.fd)
		}
	}()
	give := func(fd int) error {
		if uid < 0 {
			return nil
		}
		return unix.Fchown(fd, uid, uid)
	}
	if err := give(top); err != nil {
		return nil, nil, err
	}
	out := make([]gitIndexEntry, len(entries))
	stats := make([]fileStat, len(entries))
	for i, e := range entries {
		if !treePath(e.path) {
			return nil, nil, fmt.Errorf("path %q", e.path)
		}
		parent, name := path.Split(e.path)
		parent = strings.TrimSuffix(parent, "/")
		for last := open[len(open)-1].path; last != "" && last != parent && !strings.HasPrefix(parent, last+"/"); last = open[len(open)-1].path {
			unix.Close(open[len(open)-1].fd)
			open = open[:len(open)-1]
		}
		for last := open[len(open)-1].path; last != parent; last = open[len(open)-1].path {
			sub, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(parent, last), "/"), "/")
			at := open[len(open)-1].fd
			var fd int
			var err error
			if create {
				fd, err = mkdirOpen(at, sub)
			} else {
				fd, err = unix.Openat(at, sub, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", path.Join(last, sub), err)
			}
			open = append(open, opened{path.Join(last, sub), fd})
			if err := give(fd); err != nil {
				return nil, nil, err
			}
		}
		var st unix.Stat_t
		if err := entry(open[len(open)-1].fd, name, i, &st); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", e.path, err)
		}
		out[i] = statEntry(e, &st)
		if mode := e.modeString(); mode == modeFile || mode == modeExec {
			stats[i] = fileStat{ino: int64(st.Ino), size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), mode: mode}
		}
	}
	return out, stats, nil
}

// treePath reports whether p is a path a tree may hold: relative, each
// component neither empty, "." nor "..", no NUL.
func treePath(p string) bool {
	for c := range strings.SplitSeq(p, "/") {
		if c == "" || c == "." || c == ".." || strings.IndexByte(c, 0) >= 0 {
			return false
		}
	}
	return true
}

// mkdirOpen makes the directory name in the directory at and opens it,
// following no link.
func mkdirOpen(at int, name string) (int, error) {
	if err := unix.Mkdirat(at, name, 0o777); err != nil {
		return -1, err
	}
	return unix.Openat(at, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// writeFileAt writes the new file name in the directory at with data and
// perm, gives it to uid when uid is not negative, and fills st with its
// stat once given.
func writeFileAt(at int, name string, data []byte, perm uint32, uid int, st *unix.Stat_t) error {
	fd, err := unix.Openat(at, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return err
	}
	for len(data) > 0 && err == nil {
		var n int
		if n, err = unix.Write(fd, data); err == nil {
			data = data[n:]
		}
	}
	if err == nil && uid >= 0 {
		err = unix.Fchown(fd, uid, uid)
	}
	if err == nil {
		err = unix.Fstat(fd, st)
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}

// statEntry is e with the stat st of the file written for it, as a git
// index records it (the low 32 bits of each field). A gitlink records
// none.
func statEntry(e gitIndexEntry, st *unix.Stat_t) gitIndexEntry {
	if e.modeString() == modeGitlink {
		e.ctimeSec, e.ctimeNsec, e.mtimeSec, e.mtimeNsec, e.dev, e.ino, e.uid, e.gid, e.size = 0, 0, 0, 0, 0, 0, 0, 0, 0
		return e
	}
	e.ctimeSec, e.ctimeNsec = uint32(st.Ctim.Sec), uint32(st.Ctim.Nsec)
	e.mtimeSec, e.mtimeNsec = uint32(st.Mtim.Sec), uint32(st.Mtim.Nsec)
	e.dev, e.ino, e.uid, e.gid, e.size = uint32(st.Dev), uint32(st.Ino), st.Uid, st.Gid, uint32(st.Size)
	return e
}
