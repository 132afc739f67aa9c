package sqlite_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/sqlite"
)

// fill commits n runs with one event of 1 KiB each, so the database spans
// many pages.
func fill(t *testing.T, s store.Store, n int) {
	t.Helper()
	pad := bytes.Repeat([]byte("x"), 1024)
	for i := range n {
		id := "r" + string(rune('a'+i%26)) + strings.Repeat("z", i/26)
		must(t, s.Update(ctx, func(tx store.Tx) error {
			if err := tx.CreateRun("t", store.Run{ID: id}); err != nil {
				return err
			}
			_, err := tx.AppendEvent("t", id, func(uint64) ([]byte, error) { return pad, nil })
			return err
		}))
	}
}

// immutable makes files immutable (chattr +i), which even root cannot
// write, until the test ends; the test is skipped where that is not
// possible.
func immutable(t *testing.T, files ...string) {
	t.Helper()
	for _, f := range files {
		if out, err := exec.Command("chattr", "+i", f).CombinedOutput(); err != nil {
			t.Skipf("cannot make %s immutable: %v %s", f, err, out)
		}
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", f).Run() })
	}
}

func wantUnavailable(t *testing.T, err error, words string) {
	t.Helper()
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), words) {
		t.Fatalf("err = %v, want store.ErrUnavailable saying %q", err, words)
	}
}

// TestOpenRefusesDamagedDatabase: a database with corrupted pages is
// refused at Open, with the cause, instead of serving reads and failing
// writes.
func TestOpenRefusesDamagedDatabase(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.SyncFull)
	fill(t, s, 200)
	must(t, s.Close())
	path := filepath.Join(dir, "oecp.db")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	st, err := f.Stat()
	must(t, err)
	// A few pages in the middle of the events are overwritten: the
	// sequence, the schema and the other tables still read.
	pages := st.Size() / 4096
	_, err = f.WriteAt(bytes.Repeat([]byte{0xA5}, 4*4096), pages/2*4096)
	must(t, err)
	must(t, f.Close())
	_, err = sqlite.Open(ctx, sqlite.Options{Dir: dir})
	wantUnavailable(t, err, "damaged")
}

// TestOpenRefusesReadOnlyDatabase: a database file that cannot be written
// is refused at Open, with the cause.
func TestOpenRefusesReadOnlyDatabase(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.SyncFull)
	fill(t, s, 1)
	must(t, s.Close())
	immutable(t, filepath.Join(dir, "oecp.db"))
	_, err := sqlite.Open(ctx, sqlite.Options{Dir: dir})
	wantUnavailable(t, err, "readonly")
}

// TestWritesFailUnavailable: once the database files cannot be written, a
// write and Ping fail with store.ErrUnavailable, which the caller tells
// apart from a bug; a healthy store pings nil.
func TestWritesFailUnavailable(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.SyncFull)
	defer s.Close()
	fill(t, s, 1)
	must(t, s.Ping(ctx))
	// (Not oecp.db-shm: SQLite maps it into memory, and a write to a
	// mapped page of an immutable file is a fault, not an error.)
	immutable(t, filepath.Join(dir, "oecp.db"), filepath.Join(dir, "oecp.db-wal"))
	wantUnavailable(t, s.Update(ctx, func(tx store.Tx) error { _, err := tx.NextCounter("c"); return err }), "I/O error")
	wantUnavailable(t, s.Ping(ctx), "I/O error")
}
