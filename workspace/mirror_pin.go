package workspace

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
)

// A run's revision is pinned in the mirror by a ref of the run's. When
// the revision's tree is kept, git resolved the revision to a commit from
// this mirror: an object id names the same object forever, so once the
// mirror is seen to hold that object the host writes the ref itself, with
// no git process (pinKnown). The revision is the commit or a tag of it;
// either keeps the commit reachable. Otherwise git pins it, peeling the
// revision to a commit.

// pinKnown points ref of the mirror at dir at commit, a full object id
// git already resolved from this mirror to a commit, when the mirror
// still holds the object; it reports whether it did. Only a mirror of
// git's first formats (refs in files, SHA-1 ids) is written so: another
// one's refs or ids are not what the host writes. The mirror's lock is
// held.
func pinKnown(dir, ref, commit string) bool {
	if len(commit) != 40 || !firstFormats(dir) {
		return false
	}
	return hasObject(filepath.Join(dir, "objects"), commit) && setRef(dir, ref, commit, "") == nil
}

// firstFormats reports whether the repository at dir keeps its refs in
// files and names objects by SHA-1: its configuration sets neither
// extensions.refStorage nor extensions.objectFormat.
func firstFormats(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "config"))
	if err != nil {
		return false
	}
	c := strings.ToLower(string(b))
	return !strings.Contains(c, "refstorage") && !strings.Contains(c, "objectformat")
}

// hasObject reports whether the objects directory holds object id, loose
// or listed in the index of a pack that is there (version 2); false
// where it cannot tell.
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
		if _, err := os.Lstat(strings.TrimSuffix(p, ".idx") + ".pack"); err == nil && inPackIndex(p, raw) {
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
