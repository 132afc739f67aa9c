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
	if len(b) < 12+sha1.Size || string(b[:4]) != "DIRC" {
		return treeIndex{}, fmt.Errorf("%w: no index header", errGitIndex)
	}
	body, sum := b[:len(b)-sha1.Size], b[len(b)-sha1.Size:]
	if h := sha1.Sum(body); !bytes.Equal(h[:], sum) {
		return treeIndex{}, fmt.Errorf("%w: checksum", errGitIndex)
	}
	version := binary.BigEndian.Uint32(b[4:8])
	if version != 2 && version != 3 {
		return treeIndex{}, fmt.Errorf("%w: version %d", errGitIndex, version)
	}
	n := int(binary.BigEndian.Uint32(b[8:12]))
	x := treeIndex{commit: commit, entries: make(map[string]indexEntry, n)}
	off := 12
	for range n {
		if off+gitIndexFixed > len(body) {
			return treeIndex{}, fmt.Errorf("%w: truncated", errGitIndex)
		}
		e := body[off:]
		mode := fmt.Sprintf("%06o", binary.BigEndian.Uint32(e[24:28]))
		flags := binary.BigEndian.Uint16(e[60:62])
		start := gitIndexFixed
		if flags&gitIndexExtended != 0 {
			start += 2
		}
		end := bytes.IndexByte(e[min(start, len(e)):], 0)
		if flags&gitIndexStage != 0 || end <= 0 {
			return treeIndex{}, fmt.Errorf("%w: entry at %d", errGitIndex, off)
		}
		name := string(e[start : start+end])
		switch mode {
		case modeFile, modeExec, modeLink, modeGitlink:
		default:
			return treeIndex{}, fmt.Errorf("%w: mode %s of %q", errGitIndex, mode, name)
		}
		x.entries[name] = indexEntry{mode: mode, oid: hex.EncodeToString(e[40:60])}
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			x.entries[d] = indexEntry{mode: modeDir, oid: zeroID}
		}
		// An entry is padded with 1 to 8 NULs to a multiple of 8 bytes.
		off += (start + end + 8) &^ 7
	}
	return x, nil
}
