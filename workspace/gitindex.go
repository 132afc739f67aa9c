package workspace

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
)

// gitIndexFixed is the size of a git index entry before its path: ten
// 32-bit stat fields, a SHA-1 object id and 16 bits of flags.
const gitIndexFixed = 62

// Flags of a git index entry.
const (
	gitIndexExtended = 0x4000 // 16 more bits of flags follow (version 3)
	gitIndexStage    = 0x3000 // a merge stage other than 0
)

// errGitIndex is a git index this reader does not take: another version,
// a merge in progress, or damaged.
var errGitIndex = errors.New("git index not read")

// gitIndexEntry is one entry of a git index (stage 0): the stat git
// recorded of the file it wrote (each field as the index keeps it: the
// low 32 bits), its mode, object id and path.
type gitIndexEntry struct {
	ctimeSec, ctimeNsec, mtimeSec, mtimeNsec uint32
	dev, ino, mode, uid, gid, size           uint32
	oid                                      [sha1.Size]byte
	path                                     string
}

// modeString is the entry's mode as git prints it (without formatting
// for the four modes a tree's entries have: it is asked for each entry).
func (e gitIndexEntry) modeString() string {
	switch e.mode {
	case 0o100644:
		return modeFile
	case 0o100755:
		return modeExec
	case 0o120000:
		return modeLink
	case 0o160000:
		return modeGitlink
	}
	return fmt.Sprintf("%06o", e.mode)
}

// readGitIndex returns commit's tree from the git index of the host git
// directory dir, which git has just written from commit (read-tree
// --reset): each path's mode and object id, and the directories leading
// to them (with zeroID, as a snapshot records them). It reads index
// versions 2 and 3 of SHA-1 repositories, checks the file's checksum and
// refuses anything else (errGitIndex).
func readGitIndex(dir, commit string) (treeIndex, error) {
	b, err := os.ReadFile(filepath.Join(dir, "index"))
	if err != nil {
		return treeIndex{}, err
	}
	entries, err := parseGitIndex(b)
	if err != nil {
		return treeIndex{}, err
	}
	return treeOfGitIndex(entries, commit), nil
}

// treeOfGitIndex is commit's tree as entries record it, with the
// directories leading to them (zeroID), without stats.
func treeOfGitIndex(entries []gitIndexEntry, commit string) treeIndex {
	x := treeIndex{commit: commit, entries: make(map[string]indexEntry, len(entries))}
	for _, e := range entries {
		x.entries[e.path] = indexEntry{mode: e.modeString(), oid: hex.EncodeToString(e.oid[:])}
		for d := path.Dir(e.path); d != "."; d = path.Dir(d) {
			x.entries[d] = indexEntry{mode: modeDir, oid: zeroID}
		}
	}
	return x
}

// parseGitIndex returns the entries of the git index b, in its order
// (by path, bytewise): versions 2 and 3 of a SHA-1 repository, checksum
// checked, every entry at stage 0 with the mode of a file, an executable,
// a link or a gitlink; anything else is errGitIndex. Extensions are
// skipped.
func parseGitIndex(b []byte) ([]gitIndexEntry, error) {
	if len(b) < 12+sha1.Size || string(b[:4]) != "DIRC" {
		return nil, fmt.Errorf("%w: no index header", errGitIndex)
	}
	body, sum := b[:len(b)-sha1.Size], b[len(b)-sha1.Size:]
	if h := sha1.Sum(body); !bytes.Equal(h[:], sum) {
		return nil, fmt.Errorf("%w: checksum", errGitIndex)
	}
	version := binary.BigEndian.Uint32(b[4:8])
	if version != 2 && version != 3 {
		return nil, fmt.Errorf("%w: version %d", errGitIndex, version)
	}
	n := int(binary.BigEndian.Uint32(b[8:12]))
	if n > len(body)/gitIndexFixed {
		return nil, fmt.Errorf("%w: %d entries", errGitIndex, n)
	}
	entries := make([]gitIndexEntry, 0, n)
	off := 12
	for range n {
		if off+gitIndexFixed > len(body) {
			return nil, fmt.Errorf("%w: truncated", errGitIndex)
		}
		e := body[off:]
		u32 := func(i int) uint32 { return binary.BigEndian.Uint32(e[i*4:]) }
		flags := binary.BigEndian.Uint16(e[60:62])
		start := gitIndexFixed
		if flags&gitIndexExtended != 0 {
			start += 2
		}
		end := bytes.IndexByte(e[min(start, len(e)):], 0)
		if flags&gitIndexStage != 0 || end <= 0 {
			return nil, fmt.Errorf("%w: entry at %d", errGitIndex, off)
		}
		ge := gitIndexEntry{ctimeSec: u32(0), ctimeNsec: u32(1), mtimeSec: u32(2), mtimeNsec: u32(3), dev: u32(4), ino: u32(5),
			mode: u32(6), uid: u32(7), gid: u32(8), size: u32(9), path: string(e[start : start+end])}
		copy(ge.oid[:], e[40:60])
		switch ge.modeString() {
		case modeFile, modeExec, modeLink, modeGitlink:
		default:
			return nil, fmt.Errorf("%w: mode %s of %q", errGitIndex, ge.modeString(), ge.path)
		}
		entries = append(entries, ge)
		// An entry is padded with 1 to 8 NULs to a multiple of 8 bytes.
		off += (start + end + 8) &^ 7
	}
	return entries, nil
}

// encodeGitIndex writes entries (sorted by path, bytewise, as git keeps
// them) as a git index of version 2, without extensions, with its
// checksum. A path of 0xfff bytes or more has that length's field at
// 0xfff, as git writes it.
func encodeGitIndex(entries []gitIndexEntry) []byte {
	size := 12 + sha1.Size
	for _, e := range entries {
		size += (gitIndexFixed + len(e.path) + 8) &^ 7
	}
	b := make([]byte, 0, size)
	b = append(b, "DIRC"...)
	b = binary.BigEndian.AppendUint32(b, 2)
	b = binary.BigEndian.AppendUint32(b, uint32(len(entries)))
	for _, e := range entries {
		start := len(b)
		for _, v := range []uint32{e.ctimeSec, e.ctimeNsec, e.mtimeSec, e.mtimeNsec, e.dev, e.ino, e.mode, e.uid, e.gid, e.size} {
			b = binary.BigEndian.AppendUint32(b, v)
		}
		b = append(b, e.oid[:]...)
		b = binary.BigEndian.AppendUint16(b, uint16(min(len(e.path), 0xfff)))
		b = append(b, e.path...)
		for pad := (gitIndexFixed + len(e.path) + 8) &^ 7; len(b)-start < pad; {
			b = append(b, 0)
		}
	}
	h := sha1.Sum(b)
	return append(b, h[:]...)
}

// statTree is commit's tree as entries record it, each regular file
// with its stat from stats (same order): the index of a work tree the
// host has just written, as primeIndex would record it.
func statTree(entries []gitIndexEntry, stats []fileStat, commit string) treeIndex {
	x := treeOfGitIndex(entries, commit)
	for i, e := range entries {
		if mode := e.modeString(); mode == modeFile || mode == modeExec {
			ie := x.entries[e.path]
			ie.st, ie.hasStat = stats[i], true
			x.entries[e.path] = ie
		}
	}
	return x
}
