package workspace

import "testing"

// TestIndexMissesAnyChangedField: a recorded blob is reused only when
// every field lstat gave is the same; an agent can reset a file's
// modification time, not its change time.
func TestIndexMissesAnyChangedField(t *testing.T) {
	st := fileStat{ino: 7, size: 10, mtime: 100, ctime: 200, mode: modeFile}
	x := treeIndex{entries: map[string]indexEntry{"a": {mode: modeFile, oid: "0123456789012345678901234567890123456789", st: st, hasStat: true}}}
	if _, ok := x.cached(entry{path: "a", mode: modeFile, st: st, hasStat: true}); !ok {
		t.Fatal("an unchanged file misses")
	}
	for name, change := range map[string]func(*fileStat){
		"ino": func(s *fileStat) { s.ino++ }, "size": func(s *fileStat) { s.size++ }, "mtime": func(s *fileStat) { s.mtime++ },
		"ctime": func(s *fileStat) { s.ctime++ }, "mode": func(s *fileStat) { s.mode = modeExec },
	} {
		changed := st
		change(&changed)
		if _, ok := x.cached(entry{path: "a", mode: changed.mode, st: changed, hasStat: true}); ok {
			t.Errorf("a file whose %s changed is taken from the index", name)
		}
	}
	if _, ok := x.cached(entry{path: "a", mode: modeFile}); ok {
		t.Error("a file without a stat is taken from the index")
	}
}

// TestBlobIDIsGits: the host names a blob as git does.
func TestBlobIDIsGits(t *testing.T) {
	// git hash-object of "hello\n" and of nothing.
	if id := blobID([]byte("hello\n")); id != "ce013625030ba8dba906f756967f9e9ca394464a" {
		t.Errorf("hello: %s", id)
	}
	if id := blobID(nil); id != "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391" {
		t.Errorf("empty: %s", id)
	}
}
