package workspace

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// hostWriteMax bounds the bytes of new files a snapshot the host writes
// itself may read (Snap.Bytes): a larger one is written by git
// fast-import, and its checkpoint's bundle by git pack-objects, whose
// deltas against the source revision keep a changed large file small.
const hostWriteMax = 256 << 10

// Git object types as a pack numbers them.
const (
	objCommit = 1
	objTree   = 2
	objBlob   = 3
)

// object is one git object the host writes.
type object struct {
	oid  [sha1.Size]byte
	typ  int
	data []byte
}

// objectNames are the objects' types as their ids hash them.
var objectNames = [...]string{objCommit: "commit", objTree: "tree", objBlob: "blob"}

func newObject(typ int, data []byte) object {
	name := objectNames[typ]
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", name, len(data))
	h.Write(data)
	o := object{typ: typ, data: data}
	h.Sum(o.oid[:0])
	return o
}

// treeChild is one entry of a tree object.
type treeChild struct {
	name, mode string // mode as a tree object writes it (40000 for a tree)
	oid        [sha1.Size]byte
}

// sortKey orders a tree's entries as git does: by name, a tree's name
// compared as if it ended in a slash.
func (c treeChild) sortKey() string {
	if c.mode == "40000" {
		return c.name + "/"
	}
	return c.name
}

// hostWrite writes the commit of entries on parent (whose tree idx
// records; known: the objects it holds) in the host git directory dir as
// hostCommit makes it, as one pack, moves ref (from parent) and
// CheckpointRef to it, and returns it and the pack.
func hostWrite(dir, ref, parent, who, message string, entries []entry, idx treeIndex, known map[string]bool, blobs map[string][]byte) (string, []byte, error) {
	c, objs, err := hostCommit(entries, idx, known, blobs, parent, who, message)
	if err != nil {
		return "", nil, err
	}
	commit := hex.EncodeToString(c.oid[:])
	pack, index := packObjects(objs)
	err = storePack(dir, pack, index)
	if err == nil {
		err = setRef(dir, ref, commit, parent)
	}
	if err == nil {
		err = setRef(dir, CheckpointRef, commit, "")
	}
	if err != nil {
		return "", nil, fmt.Errorf("workspace: writing the snapshot's commit: %w", err)
	}
	return commit, pack, nil
}

// hostCommit is the commit of entries (every path's object id known) on
// parent, whose tree idx records (known: the objects it holds), and the
// objects it adds to parent's: the commit, each tree of a directory in
// which a path was added, removed or changed, and each blob parent's tree
// does not hold, from blobs (the contents identify read to hash, by
// object id). Every other object of the commit is parent's, at the same
// path.
func hostCommit(entries []entry, idx treeIndex, known map[string]bool, blobs map[string][]byte, parent, who, message string) (object, []object, error) {
	// A directory is changed when a path below it is.
	changed := map[string]bool{}
	touch := func(p string) {
		for d := path.Dir(p); ; d = path.Dir(d) {
			if changed[d] {
				return
			}
			changed[d] = true
			if d == "." {
				return
			}
		}
	}
	now := make(map[string]bool, len(entries))
	var objs []object
	added := map[[sha1.Size]byte]bool{}
	children := map[string][]treeChild{}
	for _, e := range entries {
		now[e.path] = true
		if was, ok := idx.entries[e.path]; !ok || was.mode != e.mode || was.oid != e.oid {
			touch(e.path)
		}
		c := treeChild{name: path.Base(e.path), mode: strings.TrimPrefix(e.mode, "0")}
		if _, err := hex.Decode(c.oid[:], []byte(e.oid)); err != nil || len(e.oid) != 2*sha1.Size {
			return object{}, nil, fmt.Errorf("workspace: %s has no object id (%q)", e.path, e.oid)
		}
		dir := path.Dir(e.path)
		children[dir] = append(children[dir], c)
		if e.mode == modeGitlink || known[e.oid] || added[c.oid] {
			continue
		}
		data, ok := blobs[e.oid]
		if !ok {
			return object{}, nil, fmt.Errorf("workspace: %s was not read", e.path)
		}
		blob := newObject(objBlob, data)
		objs = append(objs, blob)
		added[blob.oid] = true
	}
	for p, e := range idx.entries {
		if e.mode != modeDir && !now[p] {
			touch(p)
		}
	}
	// Every directory, deepest first, so that a tree's subtrees are known
	// when it is written; each one is a child of its parent directory.
	dirs, seen := []string{"."}, map[string]bool{".": true}
	for d := range children {
		for ; !seen[d]; d = path.Dir(d) {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	depth := func(d string) int {
		if d == "." {
			return 0
		}
		return strings.Count(d, "/") + 1
	}
	slices.SortFunc(dirs, func(a, b string) int { return depth(b) - depth(a) })
	var rootTree [sha1.Size]byte
	for _, d := range dirs {
		kids := children[d]
		slices.SortFunc(kids, func(a, b treeChild) int { return strings.Compare(a.sortKey(), b.sortKey()) })
		var buf bytes.Buffer
		for _, c := range kids {
			buf.WriteString(c.mode + " " + c.name + "\x00")
			buf.Write(c.oid[:])
		}
		tree := newObject(objTree, buf.Bytes())
		if changed[d] && !added[tree.oid] {
			objs = append(objs, tree)
			added[tree.oid] = true
		}
		if d == "." {
			rootTree = tree.oid
			continue
		}
		up := path.Dir(d)
		children[up] = append(children[up], treeChild{name: path.Base(d), mode: "40000", oid: tree.oid})
	}
	commit := newObject(objCommit, fmt.Appendf(nil, "tree %x\nparent %s\nauthor %s\ncommitter %s\n\n%s", rootTree, parent, who, who, message))
	return commit, append(objs, commit), nil
}

// packObjects returns objs as a git pack (version 2, every object whole),
// and the index (version 2) of that pack.
func packObjects(objs []object) (pack, index []byte) {
	type placed struct {
		oid    [sha1.Size]byte
		offset uint64
		crc    uint32
	}
	var p bytes.Buffer
	p.WriteString("PACK")
	p.Write(binary.BigEndian.AppendUint32(nil, 2))
	p.Write(binary.BigEndian.AppendUint32(nil, uint32(len(objs))))
	at := make([]placed, 0, len(objs))
	zw, _ := zlib.NewWriterLevel(io.Discard, zlib.BestSpeed)
	for _, o := range objs {
		start := p.Len()
		// The header: type and size, seven bits of the size at a time.
		size := uint64(len(o.data))
		b := byte(o.typ<<4) | byte(size&0x0f)
		for size >>= 4; size > 0; size >>= 7 {
			p.WriteByte(b | 0x80)
			b = byte(size & 0x7f)
		}
		p.WriteByte(b)
		zw.Reset(&p)
		zw.Write(o.data) // into memory: it cannot fail
		zw.Close()
		at = append(at, placed{oid: o.oid, offset: uint64(start), crc: crc32.ChecksumIEEE(p.Bytes()[start:])})
	}
	sum := sha1.Sum(p.Bytes())
	p.Write(sum[:])

	slices.SortFunc(at, func(a, b placed) int { return bytes.Compare(a.oid[:], b.oid[:]) })
	var x bytes.Buffer
	x.Write(packIndexMagic)
	var fanout [256]uint32
	for _, o := range at {
		for i := int(o.oid[0]); i < 256; i++ {
			fanout[i]++
		}
	}
	for _, n := range fanout {
		x.Write(binary.BigEndian.AppendUint32(nil, n))
	}
	for _, o := range at {
		x.Write(o.oid[:])
	}
	for _, o := range at {
		x.Write(binary.BigEndian.AppendUint32(nil, o.crc))
	}
	var large []uint64
	for _, o := range at {
		off := uint32(o.offset)
		if o.offset >= 1<<31 {
			off = 1<<31 | uint32(len(large))
			large = append(large, o.offset)
		}
		x.Write(binary.BigEndian.AppendUint32(nil, off))
	}
	for _, off := range large {
		x.Write(binary.BigEndian.AppendUint64(nil, off))
	}
	x.Write(sum[:])
	idxSum := sha1.Sum(x.Bytes())
	x.Write(idxSum[:])
	return p.Bytes(), x.Bytes()
}

// storePack puts a pack and its index into the object directory of the
// git directory gitDir, as git names them: the pack first, so that git,
// which finds packs by their indexes, never sees one half written.
func storePack(gitDir string, pack, index []byte) error {
	dir := filepath.Join(gitDir, "objects", "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name := filepath.Join(dir, fmt.Sprintf("pack-%x", pack[len(pack)-sha1.Size:]))
	for _, f := range []struct {
		ext  string
		data []byte
	}{{".pack", pack}, {".idx", index}} {
		tmp, err := os.CreateTemp(dir, "tmp_host_")
		if err != nil {
			return err
		}
		_, err = tmp.Write(f.data)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(tmp.Name(), 0o444)
		}
		if err == nil {
			err = os.Rename(tmp.Name(), name+f.ext)
		}
		if err != nil {
			os.Remove(tmp.Name())
			return err
		}
	}
	return nil
}

// errRefMoved is a ref that no longer holds what the host read.
var errRefMoved = errors.New("workspace: a ref of the run's git directory moved while it was written")

// setRef points ref of the git directory gitDir at commit, as git does:
// through ref.lock, taken exclusively; was, when not empty, is what the
// ref must hold (read as readHead reads it), or it is left alone.
func setRef(gitDir, ref, commit, was string) error {
	file := filepath.Join(gitDir, filepath.FromSlash(ref))
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(file+".lock", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			os.Remove(lock.Name())
		}
	}()
	if was != "" {
		if b, err := os.ReadFile(file); err == nil && strings.TrimSpace(string(b)) != was {
			lock.Close()
			return fmt.Errorf("%w: %s", errRefMoved, ref)
		}
	}
	_, err = lock.WriteString(commit + "\n")
	if cerr := lock.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(lock.Name(), file)
	}
	done = err == nil
	return err
}
