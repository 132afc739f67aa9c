package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/oecp/oecp/internal/diskusage"
)

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
	// snapshotRef is the ref of the host git directory a snapshot's commit
	// is made under before the run's branch takes it.
	snapshotRef = "refs/oecp/snapshot"
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

// tracked is what the run's branch head records: its files, its gitlinks
// and its directories.
type tracked struct {
	files    map[string]bool
	gitlinks map[string]string
	dirs     map[string]bool
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
// tree choose what is left out, as git add --all would. Git then writes
// what the host read (fast-import), in the host git directory: no git
// command runs in the work tree, and no file the agent wrote configures
// one. Nothing is read past lim (ErrTooLarge) or SnapshotTimeout. The
// run's gate must be held.
func (m *Manager) Snapshot(ctx context.Context, key, home string, id Identity, message string, lim Limits) (Snap, error) {
	ctx, cancel := context.WithTimeout(ctx, SnapshotTimeout)
	defer cancel()
	lim = lim.orDefaults()
	p := m.paths(key)
	g := m.HostGit(key, home)
	parent, err := m.Head(ctx, key, home)
	if err != nil {
		return Snap{}, err
	}
	tr, err := listTracked(ctx, g, parent)
	if err != nil {
		return Snap{}, err
	}
	root, err := os.OpenRoot(p.Workspace)
	if err != nil {
		return Snap{}, err
	}
	defer root.Close()
	walker := Git{GitDir: p.Host, Dir: p.Workspace, Home: home}
	entries, _, err := walk(ctx, root, walker, tr, lim, false)
	if err != nil {
		return Snap{}, err
	}
	snap := Snap{Commit: parent, Files: len(entries)}
	cache := readStatCache(p.Host)
	for _, e := range entries {
		if _, ok := cache.lookup(e); !ok {
			snap.Bytes += e.size
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
	started := time.Now()
	now := strconv.FormatInt(time.Now().Unix(), 10) + " +0000"
	who := fmt.Sprintf("%s <%s> %s", id.Name, id.Email, now)
	feed := func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<16)
		fmt.Fprintf(bw, "commit %s\nauthor %s\ncommitter %s\ndata %d\n%s\nfrom %s\ndeleteall\n", snapshotRef, who, who, len(message), message, parent)
		for _, e := range entries {
			if oid, ok := cache.lookup(e); ok {
				if _, err := fmt.Fprintf(bw, "M %s %s %s\n", e.mode, oid, quotePath(e.path)); err != nil {
					return err
				}
				continue
			}
			if err := writeEntry(bw, root, e); err != nil {
				return err
			}
		}
		if _, err := bw.WriteString("done\n"); err != nil {
			return err
		}
		return bw.Flush()
	}
	if err := g.pipe(ctx, feed, nil, "fast-import", "--quiet", "--done"); err != nil {
		return Snap{}, err
	}
	trees, err := g.Run(ctx, "rev-parse", snapshotRef, snapshotRef+"^{tree}", parent+"^{tree}")
	if err != nil {
		return Snap{}, err
	}
	ids := strings.Fields(trees)
	if len(ids) != 3 || !commitIDRE.MatchString(ids[0]) {
		return Snap{}, fmt.Errorf("git named %q after the snapshot", trees)
	}
	if _, err := g.Run(ctx, "update-ref", "-d", snapshotRef); err != nil {
		return Snap{}, err
	}
	if err := writeStatCache(ctx, g, p.Host, ids[0], entries, started); err != nil {
		m.log.Warn("workspace: the snapshot's stat cache is not kept", "dir", p.Dir, "err", err)
	}
	if ids[1] == ids[2] {
		return snap, nil // nothing new: the branch stays
	}
	if _, err := g.Run(ctx, "update-ref", "HEAD", ids[0], parent); err != nil {
		return Snap{}, err
	}
	snap.Commit, snap.Changed = ids[0], true
	return snap, nil
}

// listTracked reads what commit records.
func listTracked(ctx context.Context, g Git, commit string) (tracked, error) {
	tr := tracked{files: map[string]bool{}, gitlinks: map[string]string{}, dirs: map[string]bool{}}
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
			rec = strings.TrimSuffix(rec, "\x00")
			meta, name, ok := strings.Cut(rec, "\t")
			f := strings.Fields(meta)
			if !ok || len(f) != 3 {
				return fmt.Errorf("git ls-tree printed %q", rec)
			}
			switch f[1] {
			case "tree":
				tr.dirs[name] = true
			case "commit":
				tr.gitlinks[name] = f[2]
			default:
				tr.files[name] = true
			}
		}
	}
	return tr, g.pipe(ctx, nil, read, "ls-tree", "-r", "-t", "-z", "--full-tree", commit)
}

// walk lists what a snapshot records, level by level, asking git which of
// each level's new paths the work tree's ignore files leave out (a path
// the branch records is never left out), and returns those too (the
// topmost ones: nothing below an ignored directory is looked at); nothing
// is read past lim. A nested repository is ErrNestedRepository, or with
// skipNested one more path in neither list.
func walk(ctx context.Context, root *os.Root, g Git, tr tracked, lim Limits, skipNested bool) ([]entry, []string, error) {
	var out []entry
	var left []string
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
				switch t := d.Type(); {
				case t.IsDir():
					if oid, ok := tr.gitlinks[rel]; ok {
						out = append(out, entry{path: rel, mode: "160000", oid: oid})
						continue
					}
					candidates = append(candidates, entry{path: rel, mode: "dir"})
				case t&fs.ModeSymlink != 0:
					target, err := root.Readlink(rel)
					if err != nil {
						return nil, nil, err
					}
					candidates = append(candidates, entry{path: rel, mode: "120000", size: int64(len(target))})
				case t.IsRegular():
					info, err := d.Info()
					if err != nil {
						return nil, nil, err
					}
					mode := "100644"
					if info.Mode()&0o111 != 0 {
						mode = "100755"
					}
					st, ok := statOf(info, mode)
					candidates = append(candidates, entry{path: rel, mode: mode, size: info.Size(), st: st, hasStat: ok})
				}
				// FIFOs, devices and sockets are not recorded, as git
				// does not record them.
			}
		}
		ignored, err := ignoredPaths(ctx, g, candidates, tr)
		if err != nil {
			return nil, nil, err
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
func ignoredPaths(ctx context.Context, g Git, candidates []entry, tr tracked) (map[string]bool, error) {
	var ask bytes.Buffer
	n := 0
	for _, c := range candidates {
		if tr.files[c.path] || tr.dirs[c.path] {
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

// writeEntry writes e as a fast-import file command: its content is read
// by the host, a regular file through a descriptor opened without
// following a link, exactly the size the walk saw.
func writeEntry(w *bufio.Writer, root *os.Root, e entry) error {
	quoted := quotePath(e.path)
	switch e.mode {
	case "160000":
		_, err := fmt.Fprintf(w, "M 160000 %s %s\n", e.oid, quoted)
		return err
	case "120000":
		target, err := root.Readlink(e.path)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "M 120000 inline %s\ndata %d\n%s\n", quoted, len(target), target)
		return err
	}
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
	if _, err := fmt.Fprintf(w, "M %s inline %s\ndata %d\n", e.mode, quoted, e.size); err != nil {
		return err
	}
	if n, err := io.CopyN(w, f, e.size); err != nil {
		return fmt.Errorf("%w: %s: %d of %d bytes: %v", ErrChanged, e.path, n, e.size, err)
	}
	return w.WriteByte('\n')
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
