package workspace

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/oecp/oecp/internal/diskusage"
)

// ignoreFile names the files of a work tree that say what git leaves out.
const ignoreFile = ".gitignore"

// Bounds of a snapshot, counted by the host before git reads a byte of
// the work tree: a workspace past them is not recorded.
const (
	// DefaultSnapshotMaxFiles bounds the files and links a snapshot
	// records (what git does not ignore).
	DefaultSnapshotMaxFiles = 100_000
	// DefaultSnapshotMaxBytes bounds the sizes of the files a snapshot
	// reads, added up as the files state them (a sparse file counts its
	// whole length); files unchanged since the last snapshot are not
	// read.
	DefaultSnapshotMaxBytes int64 = 1 << 30
	// snapshotMaxVisits bounds the entries a snapshot looks at, ignored
	// ones included, as a multiple of its file bound.
	snapshotMaxVisits = 4
	// SnapshotTimeout bounds one snapshot's time.
	SnapshotTimeout = 5 * time.Minute
)

// Errors of Snapshot, each wrapped with its detail. ErrTooLarge: the
// workspace is over the snapshot's bounds; ErrNestedRepository: a
// directory of the workspace holds a .git of its own (another repository,
// which the host neither reads nor records); ErrChanged: a file changed
// while it was recorded.
var (
	ErrTooLarge          = errors.New("the workspace is over the bounds of what the server records")
	ErrNestedRepository  = errors.New("the workspace holds a nested git repository")
	ErrChanged           = errors.New("the workspace changed while it was recorded")
	errSnapshotWalkLimit = errors.New("too many entries")
)

// Limits bound a snapshot; zero fields take the defaults. MaxDisk, when
// set, bounds what the run's directories (workspace, the agents' and the
// host's git directories) may take once the snapshot is written: a
// snapshot that could take them past it is refused before it writes.
type Limits struct {
	MaxFiles int
	MaxBytes int64
	MaxDisk  int64
}

func (l Limits) orDefaults() Limits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultSnapshotMaxFiles
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultSnapshotMaxBytes
	}
	return l
}

// Snap is what Snapshot recorded.
type Snap struct {
	// Commit is the run's branch after the snapshot: a new commit, or its
	// previous head when the work tree holds nothing new.
	Commit string
	// Changed reports whether Commit is new.
	Changed bool
	// Files is what the snapshot recorded, Bytes what it read of them
	// (files whose stat is unchanged since the last snapshot are not
	// read again).
	Files int
	Bytes int64
	// Parent is the commit a new Commit descends from, the branch's head
	// before the snapshot.
	Parent string
	// Pack, when not nil, is a git pack (version 2) of every object a new
	// Commit adds to Parent: the host wrote the commit itself. A
	// snapshot git wrote has none.
	Pack []byte
}

// Identity is the author and committer of a snapshot's commit.
type Identity struct{ Name, Email string }

// entry is one path a snapshot records.
type entry struct {
	path string
	mode string // 100644, 100755, 120000 or 160000
	size int64
	oid  string // a gitlink's commit
	// st is a regular file's lstat, when hasStat.
	st      fileStat
	hasStat bool
}

// Snapshot records the run's workspace as a commit on the run's branch in
// its host git directory, as id with message, and returns it. The host
// reads the work tree itself: it lists directories without following a
// link, reads regular files through descriptors opened without following
// one, records a link as its target (never what it names), skips FIFOs,
// devices and sockets, and leaves out the workspace's own .git entry of
// any kind. A directory holding a .git of its own is refused
// (ErrNestedRepository) unless the branch records a gitlink there, which
// is kept as it is; no such repository is read. Ignore files in the work
// tree choose what is left out, as git add --all would. A file whose
// stat is what the host's index holds is not read again. When the tree
// is the branch head's, nothing is written; otherwise the new commit and
// the objects it adds are written in the host git directory, and the
// branch (and CheckpointRef) move to it: by the host itself, as one pack
// (Snap.Pack), when the new files take at most hostWriteMax bytes and the
// directory holds fewer than keptPacks packs, else by git fast-import from
// what the host read. No git command runs in the work tree, and no file
// the agent wrote configures one. Nothing is read past
// lim (ErrTooLarge) or SnapshotTimeout. The run's gate must be held.
func (m *Manager) Snapshot(ctx context.Context, key, home string, id Identity, message string, lim Limits) (Snap, error) {
	ctx, cancel := context.WithTimeout(ctx, SnapshotTimeout)
	defer cancel()
	lim = lim.orDefaults()
	p := m.paths(key)
	g := m.HostGit(key, home)
	ref, parent, err := readHead(ctx, g, p.Host)
	if err != nil {
		return Snap{}, err
	}
	// The clock is read before any stat is judged, and before the limit
	// (statLimit).
	clock := readClock()
	idx, err := loadIndex(ctx, g, p.Host, parent, clock)
	if err != nil {
		return Snap{}, err
	}
	root, err := os.OpenRoot(p.Workspace)
	if err != nil {
		return Snap{}, err
	}
	defer root.Close()
	limit := statLimit(filepath.Join(m.root, clockFile), root)
	walker := Git{GitDir: p.Host, Dir: p.Workspace, Home: home}
	entries, _, err := walk(ctx, root, walker, idx, lim, false)
	if err != nil {
		return Snap{}, err
	}
	snap := Snap{Commit: parent, Files: len(entries)}
	for i, e := range entries {
		if e.mode == modeFile || e.mode == modeExec {
			if oid, ok := idx.cached(e); ok {
				entries[i].oid = oid
			} else {
				snap.Bytes += e.size
			}
		}
	}
	if snap.Bytes > lim.MaxBytes {
		return Snap{}, fmt.Errorf("%w: more than %d bytes to read", ErrTooLarge, lim.MaxBytes)
	}
	if lim.MaxDisk > 0 {
		// What the snapshot writes is at most what it reads.
		used, err := diskusage.Measure([]string{p.Workspace, p.Git, p.Host}, lim.MaxDisk, nil)
		if err != nil || used+snap.Bytes > lim.MaxDisk {
			return Snap{}, fmt.Errorf("%w: the run's directories take %d bytes and recording the workspace may add %d, over the limit of %d (--agent-max-disk)",
				ErrTooLarge, used, snap.Bytes, lim.MaxDisk)
		}
	}
	// A commit the host writes itself takes the blobs' contents as they
	// were read to be hashed.
	var blobs map[string][]byte
	if snap.Bytes <= hostWriteMax && keepsPack(p.Host) && !m.gitWrites {
		blobs = map[string][]byte{}
	}
	next := treeIndex{commit: parent, entries: make(map[string]indexEntry, len(entries))}
	for i := range entries {
		e := &entries[i]
		if err := identify(root, e, blobs); err != nil {
			return Snap{}, err
		}
		next.entries[e.path] = indexEntry{mode: e.mode, oid: e.oid, st: e.st, hasStat: e.hasStat}
		for d := path.Dir(e.path); d != "."; d = path.Dir(d) {
			next.entries[d] = indexEntry{mode: modeDir, oid: zeroID}
		}
	}
	if sameTree(idx, next) {
		if err := writeIndex(p.Host, next, limit, clock); err != nil {
			m.log.Warn("workspace: the snapshot's index is not kept", "dir", p.Dir, "err", err)
		}
		return snap, nil // nothing new: the branch stays
	}
	now := strconv.FormatInt(time.Now().Unix(), 10) + " +0000"
	who := fmt.Sprintf("%s <%s> %s", id.Name, id.Email, now)
	known := make(map[string]bool, len(idx.entries))
	for _, e := range idx.entries {
		known[e.oid] = true
	}
	var commit string
	if blobs != nil {
		commit, snap.Pack, err = hostWrite(p.Host, ref, parent, who, message, entries, idx, known, blobs)
	} else {
		commit, err = gitCommit(ctx, g, p.Host, ref, parent, who, message, entries, known, root)
	}
	if err != nil {
		return Snap{}, err
	}
	next.commit = commit
	if err := writeIndex(p.Host, next, limit, clock); err != nil {
		m.log.Warn("workspace: the snapshot's index is not kept", "dir", p.Dir, "err", err)
	}
	snap.Commit, snap.Changed, snap.Parent = commit, true, parent
	return snap, nil
}

// gitCommit has git fast-import write the commit of entries on parent
// (known: the objects parent's tree holds) in the host git directory
// dir, moving ref and CheckpointRef to it, and returns it.
func gitCommit(ctx context.Context, g Git, dir, ref, parent, who, message string, entries []entry, known map[string]bool, root *os.Root) (string, error) {
	feed := func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<16)
		fmt.Fprintf(bw, "commit %s\nmark :1\nauthor %s\ncommitter %s\ndata %d\n%s\nfrom %s\ndeleteall\n", ref, who, who, len(message), message, parent)
		for _, e := range entries {
			if err := writeEntry(bw, root, e, known[e.oid]); err != nil {
				return err
			}
		}
		// get-mark prints the new commit's id on standard output.
		if _, err := fmt.Fprintf(bw, "reset %s\nfrom :1\n\nget-mark :1\ndone\n", CheckpointRef); err != nil {
			return err
		}
		return bw.Flush()
	}
	var named bytes.Buffer
	read := func(r io.Reader) error {
		_, err := io.Copy(&named, io.LimitReader(r, 1<<10))
		return err
	}
	if keepsPack(dir) {
		g.Config = append(g.Config, "fastimport.unpackLimit=0")
	}
	if err := g.pipe(ctx, feed, read, "fast-import", "--quiet", "--done"); err != nil {
		return "", err
	}
	commit := strings.TrimSpace(named.String())
	if !commitIDRE.MatchString(commit) {
		return "", fmt.Errorf("git fast-import named no commit (%q)", commit)
	}
	return commit, nil
}

// keptPacks bounds the packs of a host git directory below which a
// snapshot keeps its objects in the pack git wrote: git's default
// gc.autoPackLimit (the host git directory runs no maintenance).
const keptPacks = 50

// keepsPack reports whether a snapshot's objects stay in the one pack git
// fast-import writes, whatever their number: while the host git directory
// dir holds fewer than keptPacks packs. Past them fast-import does what it
// always does: a pack of fewer than 100 objects becomes loose objects (one
// more process, and a file and a directory per object), a larger one
// stays. So the small packs of a run's many small steps stop at keptPacks.
func keepsPack(dir string) bool {
	names, err := os.ReadDir(filepath.Join(dir, "objects", "pack"))
	if err != nil {
		return false
	}
	n := 0
	for _, e := range names {
		if strings.HasSuffix(e.Name(), ".pack") {
			n++
		}
	}
	return n < keptPacks
}

// CheckpointRef is the ref of a host git directory that names the run's
// branch head whenever a snapshot moved it: a snapshot that commits moves
// it, a restore fetches it.
const CheckpointRef = "refs/oecp/checkpoint"

// zeroID stands for the object id of a directory the host does not hash.
const zeroID = "0000000000000000000000000000000000000000"

// sameTree reports whether next records what x records: the same files,
// links and gitlinks, with the same modes and objects.
func sameTree(x, next treeIndex) bool {
	n := 0
	for p, e := range x.entries {
		if e.mode == modeDir {
			continue
		}
		n++
		if f, ok := next.entries[p]; !ok || f.mode != e.mode || f.oid != e.oid {
			return false
		}
	}
	for _, e := range next.entries {
		if e.mode != modeDir {
			n--
		}
	}
	return n == 0
}

// identify sets e's object id when it is not known: a link's from its
// target, a regular file's from its content, read as writeEntry reads it.
// With keep, what it read is kept there under that id.
func identify(root *os.Root, e *entry, keep map[string][]byte) error {
	switch {
	case e.oid != "":
		return nil
	case e.mode == modeLink:
		target, err := root.Readlink(e.path)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrChanged, e.path, err)
		}
		e.oid = blobID([]byte(target))
		if keep != nil {
			keep[e.oid] = []byte(target)
		}
		return nil
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", e.size)
	var w io.Writer = h
	var content bytes.Buffer
	if keep != nil {
		content.Grow(int(e.size))
		w = io.MultiWriter(h, &content)
	}
	if err := copyFile(w, root, *e); err != nil {
		return err
	}
	e.oid = hex.EncodeToString(h.Sum(nil))
	if keep != nil {
		keep[e.oid] = content.Bytes()
	}
	return nil
}

// readHead returns the ref the host git directory dir's HEAD names and
// the commit it holds, read from the files the host wrote (git is asked
// only when the ref is packed).
func readHead(ctx context.Context, g Git, dir string) (ref, commit string, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "HEAD"))
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: ")
	if err != nil || !ok || !strings.HasPrefix(ref, "refs/heads/") {
		return "", "", fmt.Errorf("the run's git directory has no branch checked out (%v)", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(ref))); err == nil {
		if c := strings.TrimSpace(string(b)); commitIDRE.MatchString(c) {
			return ref, c, nil
		}
	}
	c, err := g.Run(ctx, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil || !commitIDRE.MatchString(c) {
		return "", "", fmt.Errorf("the run's branch %s names %q, not a commit (%v)", ref, c, err)
	}
	return ref, c, nil
}

// walk lists what a snapshot records, level by level, asking git which of
// each level's new paths the work tree's ignore files leave out (a path
// the branch records is never left out), and returns those too (the
// topmost ones: nothing below an ignored directory is looked at); nothing
// is read past lim. A nested repository is ErrNestedRepository, or with
// skipNested one more path in neither list.
func walk(ctx context.Context, root *os.Root, g Git, tr treeIndex, lim Limits, skipNested bool) ([]entry, []string, error) {
	var out []entry
	var left []string
	ignoresSeen := false
	visits := 0
	level := []string{"."}
	for len(level) > 0 {
		var dirs []string
		var candidates []entry
		for _, dir := range level {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			names, err := readDir(root, dir, lim.MaxFiles*snapshotMaxVisits-visits)
			if errors.Is(err, errSnapshotWalkLimit) {
				return nil, nil, fmt.Errorf("%w: more than %d entries", ErrTooLarge, lim.MaxFiles*snapshotMaxVisits)
			}
			if err != nil {
				return nil, nil, err
			}
			visits += len(names)
			if dir != "." && hasGit(names) {
				if skipNested {
					continue
				}
				return nil, nil, fmt.Errorf("%w at %q", ErrNestedRepository, dir)
			}
			for _, d := range names {
				rel := d.Name()
				if dir != "." {
					rel = dir + "/" + d.Name()
				}
				if d.Name() == ".git" {
					continue // the workspace's own, named by the host
				}
				if d.Name() == ignoreFile {
					ignoresSeen = true
				}
				switch t := d.Type(); {
				case t.IsDir():
					if oid, ok := tr.gitlink(rel); ok {
						out = append(out, entry{path: rel, mode: modeGitlink, oid: oid})
						continue
					}
					candidates = append(candidates, entry{path: rel, mode: "dir"})
				case t&fs.ModeSymlink != 0:
					target, err := root.Readlink(rel)
					if err != nil {
						return nil, nil, err
					}
					candidates = append(candidates, entry{path: rel, mode: modeLink, size: int64(len(target))})
				case t.IsRegular():
					info, err := d.Info()
					if err != nil {
						return nil, nil, err
					}
					mode := modeFile
					if info.Mode()&0o111 != 0 {
						mode = modeExec
					}
					st, ok := statOf(info, mode)
					candidates = append(candidates, entry{path: rel, mode: mode, size: info.Size(), st: st, hasStat: ok})
				}
				// FIFOs, devices and sockets are not recorded, as git
				// does not record them.
			}
		}
		// Ignore files rule their own directory and below, so a level's
		// paths can be ignored only once one was seen at or above it (the
		// host's own configuration names no other).
		ignored := map[string]bool{}
		if ignoresSeen {
			var err error
			if ignored, err = ignoredPaths(ctx, g, candidates, tr); err != nil {
				return nil, nil, err
			}
		}
		for _, c := range candidates {
			if ignored[c.path] {
				left = append(left, c.path)
				continue
			}
			if c.mode == "dir" {
				dirs = append(dirs, c.path)
				continue
			}
			out = append(out, c)
			if len(out) > lim.MaxFiles {
				return nil, nil, fmt.Errorf("%w: more than %d files", ErrTooLarge, lim.MaxFiles)
			}
		}
		sort.Strings(dirs)
		level = dirs
	}
	return out, left, nil
}

// readDir lists the directory dir of root, at most max entries.
func readDir(root *os.Root, dir string, max int) ([]fs.DirEntry, error) {
	f, err := root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var all []fs.DirEntry
	for {
		names, err := f.ReadDir(1024)
		all = append(all, names...)
		if len(all) > max {
			return nil, errSnapshotWalkLimit
		}
		if err == io.EOF || (err == nil && len(names) == 0) {
			return all, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// hasGit reports whether a directory listing holds a .git entry.
func hasGit(names []fs.DirEntry) bool {
	for _, d := range names {
		if d.Name() == ".git" {
			return true
		}
	}
	return false
}

// ignoredPaths returns which candidates the work tree's ignore files
// leave out; paths the branch records are not asked about.
func ignoredPaths(ctx context.Context, g Git, candidates []entry, tr treeIndex) (map[string]bool, error) {
	var ask bytes.Buffer
	n := 0
	for _, c := range candidates {
		if tr.isFile(c.path) || tr.isDir(c.path) {
			continue
		}
		ask.WriteString(c.path)
		if c.mode == "dir" {
			ask.WriteByte('/')
		}
		ask.WriteByte(0)
		n++
	}
	ignored := map[string]bool{}
	if n == 0 {
		return ignored, nil
	}
	feed := func(w io.Writer) error { _, err := w.Write(ask.Bytes()); return err }
	read := func(r io.Reader) error {
		br := bufio.NewReader(r)
		for {
			rec, err := br.ReadString(0)
			if rec = strings.TrimSuffix(rec, "\x00"); rec != "" {
				ignored[strings.TrimSuffix(rec, "/")] = true
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	// Exit status 1: nothing is ignored.
	err := g.pipe(ctx, feed, read, "check-ignore", "--stdin", "-z", "--no-index")
	var exit *exitError
	if errors.As(err, &exit) && exit.code == 1 {
		err = nil
	}
	return ignored, err
}

// writeEntry writes e as a fast-import file command: by its object id
// when git has the object (known) or e is a gitlink, else with its
// content, read by the host (a regular file through a descriptor opened
// without following a link, exactly the size the walk saw, and it must
// still be the object identify saw).
func writeEntry(w *bufio.Writer, root *os.Root, e entry, known bool) error {
	quoted := quotePath(e.path)
	if known || e.mode == modeGitlink {
		_, err := fmt.Fprintf(w, "M %s %s %s\n", e.mode, e.oid, quoted)
		return err
	}
	if e.mode == modeLink {
		target, err := root.Readlink(e.path)
		if err != nil || blobID([]byte(target)) != e.oid {
			return fmt.Errorf("%w: %s", ErrChanged, e.path)
		}
		_, err = fmt.Fprintf(w, "M %s inline %s\ndata %d\n%s\n", modeLink, quoted, len(target), target)
		return err
	}
	if _, err := fmt.Fprintf(w, "M %s inline %s\ndata %d\n", e.mode, quoted, e.size); err != nil {
		return err
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", e.size)
	if err := copyFile(io.MultiWriter(w, h), root, e); err != nil {
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != e.oid {
		return fmt.Errorf("%w: %s", ErrChanged, e.path)
	}
	return w.WriteByte('\n')
}

// copyFile copies the regular file e to w: opened without following a
// link and without blocking (a FIFO put in its place), and exactly the
// size the walk saw.
func copyFile(w io.Writer, root *os.Root, e entry) error {
	f, err := root.OpenFile(e.path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrChanged, e.path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() || info.Size() != e.size {
		return fmt.Errorf("%w: %s", ErrChanged, e.path)
	}
	if n, err := io.CopyN(w, f, e.size); err != nil {
		return fmt.Errorf("%w: %s: %d of %d bytes: %v", ErrChanged, e.path, n, e.size, err)
	}
	return nil
}

// quotePath is a path as fast-import reads it: as it is, unless it
// starts with a quote or holds a byte that ends or confuses a line, then
// C-quoted.
func quotePath(p string) string {
	plain := !strings.HasPrefix(p, `"`)
	for i := 0; plain && i < len(p); i++ {
		plain = p[i] >= 0x20 && p[i] != 0x7f
	}
	if plain {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
