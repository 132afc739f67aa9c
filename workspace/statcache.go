package workspace

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// statCacheFile, in a host git directory, maps each regular file the last
// snapshot (or the checkout) recorded to the blob it was, keyed by what
// lstat said of it then: a file whose inode, size, mode, modification and
// change times are the same is recorded as that blob again without being
// read. Only the host writes it; an agent can set a file's modification
// time but not its change time, so it can make the host reread a file,
// never skip one it changed.
const statCacheFile = "oecp-stat-cache"

// racyWindow: a file changed this close to the moment it was looked at may
// change again within the same timestamp tick, so it is not cached.
const racyWindow = 2 * time.Second

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

// statCache is the stat cache of one host git directory: path → stat and
// blob.
type statCache map[string]cachedBlob

type cachedBlob struct {
	st  fileStat
	oid string
}

// lookup returns the blob e was, when e's stat is what the cache holds.
func (c statCache) lookup(e entry) (string, bool) {
	b, ok := c[e.path]
	if !ok || !e.hasStat || b.st != e.st {
		return "", false
	}
	return b.oid, true
}

// readStatCache reads the stat cache of the host git directory dir; a
// missing or damaged one is empty.
func readStatCache(dir string) statCache {
	c := statCache{}
	b, err := os.ReadFile(filepath.Join(dir, statCacheFile))
	if err != nil {
		return c
	}
	for _, rec := range bytes.Split(b, []byte{0}) {
		meta, path, ok := strings.Cut(string(rec), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 6 || !commitIDRE.MatchString(f[5]) {
			continue
		}
		var n [4]int64
		for i := range n {
			if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
				break
			}
		}
		if err == nil {
			c[path] = cachedBlob{st: fileStat{ino: n[0], size: n[1], mtime: n[2], ctime: n[3], mode: f[4]}, oid: f[5]}
		}
	}
	return c
}

// writeStatCache replaces the stat cache of dir with the regular files of
// entries whose stat is older than racyWindow before since (any, with a
// zero since: files no one else writes), each with the blob commit
// records at its path.
func writeStatCache(ctx context.Context, g Git, dir, commit string, entries []entry, since time.Time) error {
	blobs := map[string]string{}
	read := func(r io.Reader) error {
		br := bufio.NewReader(r)
		for {
			rec, err := br.ReadString(0)
			if meta, path, ok := strings.Cut(strings.TrimSuffix(rec, "\x00"), "\t"); ok {
				if f := strings.Fields(meta); len(f) == 3 && f[1] == "blob" {
					blobs[path] = f[2]
				}
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	if err := g.pipe(ctx, nil, read, "ls-tree", "-r", "-z", "--full-tree", commit); err != nil {
		return err
	}
	limit := int64(1<<63 - 1)
	if !since.IsZero() {
		limit = since.Add(-racyWindow).UnixNano()
	}
	var out bytes.Buffer
	for _, e := range entries {
		oid, ok := blobs[e.path]
		if !ok || !e.hasStat || e.st.mtime >= limit || e.st.ctime >= limit {
			continue
		}
		fmt.Fprintf(&out, "%d %d %d %d %s %s\t%s\x00", e.st.ino, e.st.size, e.st.mtime, e.st.ctime, e.st.mode, oid, e.path)
	}
	tmp := filepath.Join(dir, statCacheFile+".tmp")
	if err := os.WriteFile(tmp, out.Bytes(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, statCacheFile))
}

// primeStatCache writes the stat cache of a work tree the host has just
// written from commit, so that the first snapshot reads only what agents
// changed. Failing, it leaves no cache (the first snapshot reads
// everything).
func (m *Manager) primeStatCache(ctx context.Context, home string, p Paths, commit string) {
	g := Git{GitDir: p.Host, Home: home}
	tr, err := listTracked(ctx, g, commit)
	if err == nil {
		var root *os.Root
		if root, err = os.OpenRoot(p.Workspace); err == nil {
			var entries []entry
			entries, _, err = walk(ctx, root, Git{GitDir: p.Host, Dir: p.Workspace, Home: home}, tr, Limits{}.orDefaults(), true)
			root.Close()
			if err == nil {
				err = writeStatCache(ctx, g, p.Host, commit, entries, time.Time{})
			}
		}
	}
	if err != nil {
		_ = os.Remove(filepath.Join(p.Host, statCacheFile))
		m.log.Info("workspace: no stat cache for the first snapshot", "dir", p.Dir, "err", err)
	}
}
