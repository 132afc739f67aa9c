package workspace

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
)

// A run's revision is pinned in the mirror by a ref of the run's. When
// the revision's tree is kept, git read it from this mirror as a commit:
// an object id names the same object forever, so once the mirror is seen
// to hold that object the host writes the ref itself, with no git process
// (pinKnown). Otherwise git pins it, peeling the revision to a commit.

// pinKnown points ref of the mirror at dir at commit, a full object id
// already read from this mirror as a commit, when the mirror still holds
// the object; it reports whether it did. The mirror's lock is held.
func pinKnown(dir, ref, commit string) bool {
	return hasObject(filepath.Join(dir, "objects"), commit) && setRef(dir, ref, commit, "") == nil
}

// hasObject reports whether the objects directory holds object id, loose
// or listed in a pack's index (version 2); false where it cannot tell.
func hasObject(objects, id string) bool {
	raw, err := hex.DecodeString(id)
	if err != nil || (len(raw) != 20 && len(raw) != 32) {
		return false
	}
	if _, err := os.Lstat(filepath.Join(objects, id[:2], id[2:])); err == nil {
		return true
	}
	idxs, _ := filepath.Glob(filepath.Join(objects, "pack", "pack-*.idx"))
	for _, p := range idxs {
		if inPackIndex(p, raw) {
			return true
		}
	}
	return false
}

// packIndexMagic opens a version-2 pack index.
var packIndexMagic = []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}

// inPackIndex reports whether the pack index at path lists object id: its
// fan-out table bounds the sorted ids that start with id's first byte,
// searched by halves.
func inPackIndex(path string, id []byte) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var head [8 + 256*4]byte
	if _, err := f.ReadAt(head[:], 0); err != nil || !bytes.Equal(head[:8], packIndexMagic) {
		return false
	}
	fan := func(b int) int64 { return int64(binary.BigEndian.Uint32(head[8+4*b:])) }
	lo, hi := int64(0), fan(int(id[0]))
	if id[0] > 0 {
		lo = fan(int(id[0]) - 1)
	}
	at := make([]byte, len(id))
	for lo < hi {
		mid := lo + (hi-lo)/2
		if _, err := f.ReadAt(at, int64(len(head))+mid*int64(len(id))); err != nil {
			return false
		}
		switch c := bytes.Compare(at, id); {
		case c == 0:
			return true
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return false
}
