package workspace

import "testing"

// TestStatCacheMissesAnyChangedField: a cached blob is reused only when
// every field lstat gave is the same; an agent can reset a file's
// modification time, not its change time.
func TestStatCacheMissesAnyChangedField(t *testing.T) {
	st := fileStat{ino: 7, size: 10, mtime: 100, ctime: 200, mode: "100644"}
	c := statCache{"a": {st: st, oid: "0123456789012345678901234567890123456789"}}
	if _, ok := c.lookup(entry{path: "a", st: st, hasStat: true}); !ok {
		t.Fatal("an unchanged file misses")
	}
	for name, change := range map[string]func(*fileStat){
		"ino": func(s *fileStat) { s.ino++ }, "size": func(s *fileStat) { s.size++ }, "mtime": func(s *fileStat) { s.mtime++ },
		"ctime": func(s *fileStat) { s.ctime++ }, "mode": func(s *fileStat) { s.mode = "100755" },
	} {
		changed := st
		change(&changed)
		if _, ok := c.lookup(entry{path: "a", st: changed, hasStat: true}); ok {
			t.Errorf("a file whose %s changed is taken from the cache", name)
		}
	}
	if _, ok := c.lookup(entry{path: "a"}); ok {
		t.Error("a file without a stat is taken from the cache")
	}
}
