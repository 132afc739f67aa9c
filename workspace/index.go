package workspace

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// indexFile, in a host git directory, is the host's record of the tree of
// the run's branch head: every entry's path, mode and object id, and for
// each regular file the lstat the host saw when it last wrote or read it.
// A snapshot takes what the branch records from it (no git process) and
// records a file whose stat is unchanged as the same blob without reading
// it. Only the host writes it; an agent can set a file's modification
// time but not its change time, so it can make the host read a file
// again, never skip one it changed.
const indexFile = "oecp-index"

// indexMagic starts the index file, followed by the commit it describes
// and the clock its stats were judged by: the boot and the wall clock's
// offset (clockState).
const indexMagic = "oecp-index 2 "

// indexMagicV1 started the index files of earlier servers, which do not
// say what clock their stats were judged by: they are read without stats.
const indexMagicV1 = "oecp-index 1 "

// clockState is what an index records of the clock its stats were judged
// by: the boot, and the wall clock less the time since boot, which moves
// only when the wall clock is stepped. A stat judged before a step back
// of the wall clock proves nothing after it: a later change may be given
// a change time before the limit it was judged by.
type clockState struct {
	boot   string
	offset int64 // CLOCK_REALTIME - CLOCK_BOOTTIME, nanoseconds
}

// clockSlack is how far the offset of two readings of the same clock may
// differ without a step (the two clocks are not read at one instant).
const clockSlack = int64(time.Millisecond)

// bootID is this boot's id, read once: a process does not outlive its
// boot. It is "" where it cannot be read.
var bootID = sync.OnceValue(func() string {
	id, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(id))
})

// readClock reads the clock's state now; boot is "" where it cannot be
// read, and such a state matches none.
func readClock() clockState {
	var boot, wall unix.Timespec
	if bootID() == "" || unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot) != nil || unix.ClockGettime(unix.CLOCK_REALTIME, &wall) != nil {
		return clockState{}
	}
	return clockState{boot: bootID(), offset: wall.Nano() - boot.Nano()}
}

// holds reports whether stats judged under the clock state c still prove
// a file unchanged under now: the same boot, and no step back since.
func (c clockState) holds(now clockState) bool {
	return c.boot != "" && c.boot == now.boot && now.offset >= c.offset-clockSlack
}

// racyWindow: where the file system's clock cannot be read (statLimit), a
// file changed this close to the moment it was looked at may change again
// within the same timestamp tick, so its stat is not kept.
const racyWindow = 2 * time.Second

// Modes of tree entries as git prints them.
const (
	modeFile    = "100644"
	modeExec    = "100755"
	modeLink    = "120000"
	modeGitlink = "160000"
	modeDir     = "040000"
)

// fileStat is what lstat said of a regular file.
type fileStat struct {
	ino, size, mtime, ctime int64
	mode                    string
}

func statOf(info os.FileInfo, mode string) (fileStat, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}, false
	}
	return fileStat{ino: int64(st.Ino), size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), mode: mode}, true
}

// indexEntry is one path of a tree: its mode and object id, and a regular
// file's stat when hasStat.
type indexEntry struct {
	mode, oid string
	st        fileStat
	hasStat   bool
}

// treeIndex is the host's record of commit's tree, by path.
type treeIndex struct {
	commit  string
	entries map[string]indexEntry
	clock   clockState // what the stats were judged by (read from the file)
}

// isFile reports whether the tree records a file or a link at path.
func (x treeIndex) isFile(path string) bool {
	e, ok := x.entries[path]
	return ok && e.mode != modeDir && e.mode != modeGitlink
}

// isDir reports whether the tree records a directory at path.
func (x treeIndex) isDir(path string) bool { return x.entries[path].mode == modeDir }

// gitlink returns the commit a gitlink at path names.
func (x treeIndex) gitlink(path string) (string, bool) {
	e, ok := x.entries[path]
	return e.oid, ok && e.mode == modeGitlink
}

// cached returns the blob e was, when the tree records e's path with e's
// stat.
func (x treeIndex) cached(e entry) (string, bool) {
	c, ok := x.entries[e.path]
	if !ok || !e.hasStat || !c.hasStat || c.st != e.st || c.mode != e.mode {
		return "", false
	}
	return c.oid, true
}

// loadIndex returns the host's record of commit's tree: the index file of
// the host git directory dir when it describes commit (without stats when
// the machine has booted or its wall clock stepped back between their
// judging and now, the clock state read now), else the tree as git lists
// it (without stats).
func loadIndex(ctx context.Context, g Git, dir, commit string, now clockState) (treeIndex, error) {
	if x, ok := readIndex(dir); ok && x.commit == commit {
		if !x.clock.holds(now) {
			for path, e := range x.entries {
				e.st, e.hasStat = fileStat{}, false
				x.entries[path] = e
			}
		}
		return x, nil
	}
	return listTree(ctx, g, commit)
}

// readIndex reads the index file of dir; a missing or damaged one is not
// ok.
func readIndex(dir string) (treeIndex, bool) {
	b, err := os.ReadFile(filepath.Join(dir, indexFile))
	if err != nil {
		return treeIndex{}, false
	}
	head, body, ok := bytes.Cut(b, []byte{'\n'})
	var clock clockState
	rest, found := strings.CutPrefix(string(head), indexMagic)
	if found {
		f := strings.Fields(rest)
		if len(f) != 3 {
			return treeIndex{}, false
		}
		offset, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return treeIndex{}, false
		}
		rest, clock = f[0], clockState{boot: f[1], offset: offset}
	} else {
		rest, found = strings.CutPrefix(string(head), indexMagicV1)
	}
	commit := rest
	if !ok || !found || !commitIDRE.MatchString(commit) {
		return treeIndex{}, false
	}
	x := treeIndex{commit: commit, entries: map[string]indexEntry{}, clock: clock}
	for _, rec := range bytes.Split(body, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		meta, path, ok := strings.Cut(string(rec), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 6 || !commitIDRE.MatchString(f[1]) {
			return treeIndex{}, false
		}
		e := indexEntry{mode: f[0], oid: f[1]}
		var n [4]int64
		for i := range n {
			if n[i], err = strconv.ParseInt(f[2+i], 10, 64); err != nil {
				return treeIndex{}, false
			}
		}
		if n[0] != 0 || n[2] != 0 || n[3] != 0 {
			e.st, e.hasStat = fileStat{ino: n[0], size: n[1], mtime: n[2], ctime: n[3], mode: f[0]}, true
		}
		x.entries[path] = e
	}
	return x, true
}

// keepEveryStat, as writeIndex's limit, keeps every stat: the files were
// written by the host, and no one else has written them since.
const keepEveryStat = int64(1<<63 - 1)

// writeIndex replaces the index file of dir with x, keeping the stat of
// the files whose modification and change times are both before limit
// (nanoseconds since the epoch), judged under the clock state clock, read
// before the limit was: a file changed again within the clock tick of its
// stat would show the same stat, so only a stat from a tick that had
// ended before the files were looked at is kept.
func writeIndex(dir string, x treeIndex, limit int64, clock clockState) error {
	boot := clock.boot
	if boot == "" || strings.ContainsAny(boot, " \t\n") {
		boot, limit = "-", 0 // a clock no reading matches: keep no stat
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "%s%s %s %d\n", indexMagic, x.commit, boot, clock.offset)
	for path, e := range x.entries {
		st := e.st
		if !e.hasStat || st.mtime >= limit || st.ctime >= limit {
			st = fileStat{}
		}
		fmt.Fprintf(&out, "%s %s %d %d %d %d\t%s\x00", e.mode, e.oid, st.ino, st.size, st.mtime, st.ctime, path)
	}
	tmp := filepath.Join(dir, indexFile+".tmp")
	if err := os.WriteFile(tmp, out.Bytes(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, indexFile))
}

// clockFile, in a manager's root, is the file whose change time a
// snapshot sets as it begins, to read the file system's own clock. It
// holds nothing; any snapshot of the manager may touch it.
const clockFile = "oecp-clock"

// statLimit is the limit of writeIndex for the files under root that a
// snapshot is about to look at: the change time the file system gives
// clock (a file of the host's, made when missing) at this moment. A file
// whose change time is before it was last changed in an earlier tick of
// the same clock, and any later change gets a change time at or after it
// (unless the wall clock steps back, which the index's clockState tells),
// so a stat read after this call and before that limit identifies the
// file's content: the change time is the kernel's, and an agent can set a
// modification time, not a change time. Where clock and root are not on
// one file system (two clocks, two granularities), or clock cannot be
// written, the limit is racyWindow before now by the host's clock.
func statLimit(clock string, root *os.Root) int64 {
	fallback := time.Now().Add(-racyWindow).UnixNano()
	fd, err := unix.Open(clock, unix.O_RDONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fallback
	}
	defer unix.Close(fd)
	now := unix.NsecToTimeval(time.Now().UnixNano())
	var mark unix.Stat_t
	if unix.Futimes(fd, []unix.Timeval{now, now}) != nil || unix.Fstat(fd, &mark) != nil || mark.Mode&unix.S_IFMT != unix.S_IFREG {
		return fallback
	}
	top, err := root.Stat(".")
	t, ok := sysStat(top, err)
	if !ok || uint64(t.Dev) != uint64(mark.Dev) {
		return fallback
	}
	return mark.Ctim.Nano()
}

// sysStat is the system's stat of info, when there is one.
func sysStat(info os.FileInfo, err error) (*syscall.Stat_t, bool) {
	if err != nil {
		return nil, false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return st, ok
}

// listTree reads commit's tree from git, directories included.
func listTree(ctx context.Context, g Git, commit string) (treeIndex, error) {
	x := treeIndex{commit: commit, entries: map[string]indexEntry{}}
	read := func(r io.Reader) error {
		br := bufio.NewReader(r)
		for {
			rec, err := br.ReadString(0)
			if err == io.EOF && rec == "" {
				return nil
			}
			if err != nil && err != io.EOF {
				return err
			}
			meta, name, ok := strings.Cut(strings.TrimSuffix(rec, "\x00"), "\t")
			f := strings.Fields(meta)
			if !ok || len(f) != 3 {
				return fmt.Errorf("git ls-tree printed %q", rec)
			}
			x.entries[name] = indexEntry{mode: f[0], oid: f[2]}
		}
	}
	return x, g.pipe(ctx, nil, read, "ls-tree", "-r", "-t", "-z", "--full-tree", commit)
}

// blobID is the object id git gives a blob of content.
func blobID(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// primeIndex writes the index of a work tree the host has just written
// from commit (nothing else writes it before the host returns), so that
// the first snapshot reads only what agents changed. It takes commit's
// tree from the git index that wrote the work tree, or from git
// (ls-tree) when that index is not one it reads. Failing, it leaves
// no index (the first snapshot reads everything).
func (m *Manager) primeIndex(ctx context.Context, home string, p Paths, commit string) {
	x, err := readGitIndex(p.Host, commit)
	if err != nil {
		x, err = listTree(ctx, Git{GitDir: p.Host, Home: home}, commit)
	}
	if err == nil {
		for path, e := range x.entries {
			if e.mode != modeFile && e.mode != modeExec {
				continue
			}
			if info, lerr := os.Lstat(filepath.Join(p.Workspace, filepath.FromSlash(path))); lerr == nil && info.Mode().IsRegular() {
				e.st, e.hasStat = statOf(info, e.mode)
				x.entries[path] = e
			}
		}
		err = writeIndex(p.Host, x, keepEveryStat, readClock())
	}
	if err != nil {
		_ = os.Remove(filepath.Join(p.Host, indexFile))
		m.log.Info("workspace: no index for the first snapshot", "dir", p.Dir, "err", err)
	}
}
