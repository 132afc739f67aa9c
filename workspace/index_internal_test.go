package workspace

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

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

// TestStatLimitOrdersChanges: a file changed before statLimit has a
// change time at or before the limit (a stat of it is kept only when
// strictly before), and a change after it a change time at or after it,
// so the stat of a file looked at after statLimit and kept identifies
// what it held.
func TestStatLimitOrdersChanges(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	clock := filepath.Join(t.TempDir(), clockFile)
	f := filepath.Join(dir, "f")
	for i := range 200 {
		if err := os.WriteFile(f, []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
		before := changeTime(t, f)
		limit := statLimit(clock, root)
		if before > limit {
			t.Fatalf("round %d: a change before the limit %d has change time %d", i, limit, before)
		}
		if err := os.WriteFile(f, []byte{byte(i), 1}, 0o644); err != nil {
			t.Fatal(err)
		}
		if after := changeTime(t, f); after < limit {
			t.Fatalf("round %d: a change after the limit %d has change time %d", i, limit, after)
		}
	}
	info, err := os.Lstat(clock)
	if err != nil || !info.Mode().IsRegular() || info.Size() != 0 {
		t.Fatalf("the clock file: %v %v", info, err)
	}
}

// TestStatLimitOfAnotherFileSystemIsTheWindow: a clock file on another
// file system than the tree says nothing of the tree's clock; the limit
// is then racyWindow before now.
func TestStatLimitOfAnotherFileSystemIsTheWindow(t *testing.T) {
	dir := t.TempDir()
	other, err := os.MkdirTemp("/dev/shm", "clock-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.RemoveAll(other)
	if sameDevice(t, dir, other) {
		t.Skip("/dev/shm and the temporary directory are one file system")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	limit := statLimit(filepath.Join(other, clockFile), root)
	if limit > time.Now().Add(-racyWindow).UnixNano() {
		t.Fatalf("limit %d is not racyWindow before now", limit)
	}
}

// TestIndexKeepsStatsOnlyUnderItsClock: an index's stats are read back
// only under the clock they were judged by; after a reboot, a step back
// of the wall clock, or from an index that names no clock (an earlier
// server's), the tree is read without them.
func TestIndexKeepsStatsOnlyUnderItsClock(t *testing.T) {
	now := readClock()
	if now.boot == "" {
		t.Skip("no boot id")
	}
	const commit = "0123456789012345678901234567890123456789"
	st := fileStat{ino: 7, size: 10, mtime: 100, ctime: 200, mode: modeFile}
	x := treeIndex{commit: commit, entries: map[string]indexEntry{"a": {mode: modeFile, oid: commit, st: st, hasStat: true}}}
	for name, tc := range map[string]struct {
		clock clockState
		keeps bool
	}{
		"the same clock":         {now, true},
		"the clock stepped on":   {clockState{now.boot, now.offset - int64(time.Hour)}, true},
		"another boot":           {clockState{"another-boot", now.offset}, false},
		"the clock stepped back": {clockState{now.boot, now.offset + int64(time.Second)}, false},
		"a clock unknown":        {clockState{}, false},
	} {
		dir := t.TempDir()
		if err := writeIndex(dir, x, keepEveryStat, tc.clock); err != nil {
			t.Fatal(err)
		}
		got, err := loadIndex(context.Background(), Git{}, dir, commit, now)
		if err != nil || got.entries["a"].oid != commit {
			t.Fatalf("%s: %+v %v", name, got, err)
		}
		if got.entries["a"].hasStat != tc.keeps {
			t.Errorf("%s: stat kept %v, want %v", name, got.entries["a"].hasStat, tc.keeps)
		}
	}
	dir := t.TempDir()
	v1 := indexMagicV1 + commit + "\n" + modeFile + " " + commit + " 7 10 100 200\ta\x00"
	if err := os.WriteFile(filepath.Join(dir, indexFile), []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := loadIndex(context.Background(), Git{}, dir, commit, now)
	if err != nil || got.entries["a"].oid != commit || got.entries["a"].hasStat {
		t.Fatalf("an earlier server's index: %+v %v", got, err)
	}
}

// TestWriteIndexKeepsOnlyStatsBeforeTheLimit: a stat whose change or
// modification time is at or after the limit is not kept.
func TestWriteIndexKeepsOnlyStatsBeforeTheLimit(t *testing.T) {
	const commit = "0123456789012345678901234567890123456789"
	const limit = 1000
	x := treeIndex{commit: commit, entries: map[string]indexEntry{}}
	for name, st := range map[string]fileStat{
		"before": {ino: 1, size: 1, mtime: limit - 1, ctime: limit - 1},
		"ctime":  {ino: 2, size: 1, mtime: limit - 1, ctime: limit},
		"mtime":  {ino: 3, size: 1, mtime: limit, ctime: limit - 1},
	} {
		st.mode = modeFile
		x.entries[name] = indexEntry{mode: modeFile, oid: commit, st: st, hasStat: true}
	}
	dir := t.TempDir()
	if err := writeIndex(dir, x, limit, readClock()); err != nil {
		t.Fatal(err)
	}
	got, ok := readIndex(dir)
	if !ok {
		t.Fatal("the index is not read back")
	}
	for name, want := range map[string]bool{"before": true, "ctime": false, "mtime": false} {
		if got.entries[name].hasStat != want {
			t.Errorf("%s: stat kept %v, want %v", name, got.entries[name].hasStat, want)
		}
	}
}

func changeTime(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Lstat(path)
	st, ok := sysStat(info, err)
	if !ok {
		t.Fatal(err)
	}
	return st.Ctim.Nano()
}

func sameDevice(t *testing.T, a, b string) bool {
	t.Helper()
	ia, erra := os.Lstat(a)
	ib, errb := os.Lstat(b)
	sa, oka := sysStat(ia, erra)
	sb, okb := sysStat(ib, errb)
	if !oka || !okb {
		t.Fatal(erra, errb)
	}
	return sa.Dev == sb.Dev
}
