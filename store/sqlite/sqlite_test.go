package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/sqlite"
	"github.com/oecp/oecp/store/storetest"
)

func TestMain(m *testing.M) {
	if child := os.Getenv(childEnv); child != "" {
		os.Exit(runChild(child))
	}
	testkit.Main(m)
}

var ctx = context.Background()

var syncModes = []string{sqlite.SyncFull, sqlite.SyncNormal}

func open(t *testing.T, dir, sync string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(ctx, sqlite.Options{Dir: dir, Sync: sync})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	for _, mode := range syncModes {
		t.Run(mode, func(t *testing.T) {
			opener := func(t *testing.T) store.Store { return open(t, t.TempDir(), mode) }
			storetest.Run(t, opener)
			t.Run("Leases", func(t *testing.T) { storetest.RunLeases(t, opener) })
		})
	}
}

func body(seq uint64) ([]byte, error) { return fmt.Appendf(nil, "ev-%d", seq), nil }

// TestReopenKeepsEverything commits every kind of record, closes the store
// and opens the directory again: everything is there, with the same
// sequences, and the sequence continues where it stopped (also past the
// events of a tombstoned run).
func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.SyncNormal)
	must(t, s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster("a", store.Cluster{Version: 1, Data: []byte("c1")}); err != nil {
			return err
		}
		if err := tx.PutIdempotency("a", "k", store.Receipt{Fingerprint: "f", Result: []byte(`{"ok":true}`)}); err != nil {
			return err
		}
		for _, r := range []string{"keep", "gone"} {
			if err := tx.CreateRun("a", store.Run{ID: r, Seed: []byte(`"seed"`)}); err != nil {
				return err
			}
		}
		for _, r := range []string{"keep", "gone", "keep", "gone"} { // seqs 1..4
			if _, err := tx.AppendEvent("a", r, body); err != nil {
				return err
			}
		}
		for range 3 {
			if _, err := tx.NextCounter("runs"); err != nil {
				return err
			}
		}
		return nil
	}))
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.TombstoneRun("a", "gone") }))
	must(t, s.Close())
	if err := s.Close(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.View(ctx, func(store.ReadTx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("View after Close: %v", err)
	}

	s = open(t, dir, sqlite.SyncFull)
	defer s.Close()
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		if c, ok, _ := tx.Cluster("a"); !ok || c.Version != 1 || string(c.Data) != "c1" {
			return fmt.Errorf("cluster %+v %v", c, ok)
		}
		if r, ok, _ := tx.Idempotency("a", "k"); !ok || r.Fingerprint != "f" || string(r.Result) != `{"ok":true}` {
			return fmt.Errorf("receipt %+v %v", r, ok)
		}
		keep, _, _ := tx.Run("a", "keep")
		if keep.FirstSeq != 1 || keep.LastSeq != 3 || keep.Count != 2 || keep.Tombstoned || string(keep.Seed) != `"seed"` {
			return fmt.Errorf("run keep %+v", keep)
		}
		gone, _, _ := tx.Run("a", "gone")
		if !gone.Tombstoned || gone.LastSeq != 4 {
			return fmt.Errorf("run gone %+v", gone)
		}
		evs, _ := tx.Events("a", "keep", 0, 10)
		if len(evs) != 2 || evs[0].Seq != 1 || evs[1].Seq != 3 || evs[1].Index != 2 || string(evs[1].Body) != "ev-3" {
			return fmt.Errorf("events %+v", evs)
		}
		if evs, _ := tx.Events("a", "gone", 0, 10); len(evs) != 0 {
			return fmt.Errorf("tombstoned run has events after reopen: %+v", evs)
		}
		if _, ok, _ := tx.Event("a", 4); ok {
			return errors.New("tombstoned event readable after reopen")
		}
		if last, _ := tx.LastSeq(); last != 4 {
			return fmt.Errorf("LastSeq %d after reopen, want 4", last)
		}
		return nil
	}))
	must(t, s.Update(ctx, func(tx store.Tx) error {
		if v, err := tx.NextCounter("runs"); err != nil || v != 4 {
			return fmt.Errorf("counter after reopen %d %v, want 4", v, err)
		}
		// The last events belonged to the tombstoned run: their numbers
		// are never handed out again.
		ev, err := tx.AppendEvent("a", "keep", body)
		if err == nil && (ev.Seq != 5 || ev.Index != 3) {
			err = fmt.Errorf("appended seq %d index %d, want 5 and 3", ev.Seq, ev.Index)
		}
		return err
	}))
}

// TestSecondOpenFailsFast: the data directory is exclusive, also within
// one process, and free again after Close.
func TestSecondOpenFailsFast(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, "")
	_, err := sqlite.Open(ctx, sqlite.Options{Dir: dir})
	var le *sqlite.LockedError
	if !errors.Is(err, sqlite.ErrLocked) || !errors.As(err, &le) {
		t.Fatalf("second Open: %v, want a LockedError", err)
	}
	want := fmt.Sprintf("data directory %s is in use by another oecp serve (pid %d)", dir, os.Getpid())
	if le.PID != os.Getpid() || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want it to contain %q", err, want)
	}
	must(t, s.Close())
	open(t, dir, "").Close()
}

func TestOptions(t *testing.T) {
	if _, err := sqlite.Open(ctx, sqlite.Options{Dir: t.TempDir(), Sync: "off"}); err == nil || !strings.Contains(err.Error(), "sync mode") {
		t.Fatalf("unknown sync mode: %v", err)
	}
	// The directory is created, private.
	dir := filepath.Join(t.TempDir(), "a", "b")
	s := open(t, dir, "")
	must(t, s.Close())
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data directory %v %v, want mode 0700", fi.Mode(), err)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	for _, c := range []struct{ xdg, want string }{
		{"/state", "/state/oecp"},
		{"", "/home/u/.local/state/oecp"},
		{"relative/ignored", "/home/u/.local/state/oecp"},
	} {
		t.Setenv("XDG_STATE_HOME", c.xdg)
		if got, err := sqlite.DefaultDir(); err != nil || got != c.want {
			t.Errorf("XDG_STATE_HOME=%q: %q %v, want %q", c.xdg, got, err, c.want)
		}
	}
}

// TestMigrateFromVersion1 opens a database at schema version 1 (before
// leases): Open migrates it, keeping its data.
func TestMigrateFromVersion1(t *testing.T) {
	dir := t.TempDir()
	old, err := sqlite.OpenAtVersion(ctx, sqlite.Options{Dir: dir}, 1)
	must(t, err)
	must(t, old.Close())
	db := rawDB(t, dir)
	if _, err := db.Exec(`INSERT INTO clusters (tenant, version, data) VALUES ('a', 1, x'7631')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`SELECT 1 FROM leases`); err == nil {
		t.Fatal("version-1 database already has the leases table")
	}
	must(t, db.Close())

	s := open(t, dir, "")
	defer s.Close()
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		if c, ok, _ := tx.Cluster("a"); !ok || string(c.Data) != "v1" {
			return fmt.Errorf("data lost by migration: %+v %v", c, ok)
		}
		return nil
	}))
	if _, err := s.AcquireLease(ctx, "x", "A"); err != nil {
		t.Fatalf("lease after migration: %v", err)
	}
	if v := userVersion(t, dir); v != sqlite.SchemaVersion {
		t.Fatalf("user_version %d after migration, want %d", v, sqlite.SchemaVersion)
	}
}

func TestRefuseNewerSchema(t *testing.T) {
	dir := t.TempDir()
	open(t, dir, "").Close()
	db := rawDB(t, dir)
	_, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", sqlite.SchemaVersion+1))
	must(t, err)
	must(t, db.Close())
	_, err = sqlite.Open(ctx, sqlite.Options{Dir: dir})
	if !errors.Is(err, sqlite.ErrSchemaTooNew) || !strings.Contains(err.Error(), "upgrade oecp") {
		t.Fatalf("Open of a newer schema: %v", err)
	}
	// The refusal released the directory and changed nothing.
	db = rawDB(t, dir)
	defer db.Close()
	var v int
	must(t, db.QueryRow("PRAGMA user_version").Scan(&v))
	if v != sqlite.SchemaVersion+1 {
		t.Fatalf("user_version changed to %d", v)
	}
}

// TestLeaseTakeoverAcrossRestart: the process that held a lease is gone
// (its store closed); the next one takes the lease over with a new epoch,
// and the old epoch is fenced.
func TestLeaseTakeoverAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	name := store.RunLease("t", "r")
	s := open(t, dir, "")
	e1, err := s.AcquireLease(ctx, name, "proc-1")
	must(t, err)
	must(t, s.Close())

	s = open(t, dir, "")
	defer s.Close()
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		l, ok, err := tx.Lease(name)
		if err != nil || !ok || l.Owner != "proc-1" || l.Epoch != e1 {
			return fmt.Errorf("lease after restart %+v %v %v", l, ok, err)
		}
		return nil
	}))
	e2, err := s.AcquireLease(ctx, name, "proc-2")
	must(t, err)
	if e2 != e1+1 {
		t.Fatalf("takeover epoch %d, want %d", e2, e1+1)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return store.CheckLease(tx, name, e1) }); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("old epoch after takeover: %v", err)
	}
	must(t, s.Update(ctx, func(tx store.Tx) error { return store.CheckLease(tx, name, e2) }))
}

func rawDB(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, "oecp.db"))
	must(t, err)
	return db
}

func userVersion(t *testing.T, dir string) int {
	t.Helper()
	db := rawDB(t, dir)
	defer db.Close()
	var v int
	must(t, db.QueryRow("PRAGMA user_version").Scan(&v))
	return v
}

// TestViewIsASnapshot: a commit made while a View is open is invisible to
// it, and visible to the next View.
func TestViewIsASnapshot(t *testing.T) {
	s := open(t, t.TempDir(), sqlite.SyncNormal)
	defer s.Close()
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.CreateRun("a", store.Run{ID: "r"}) }))
	appendOne := func() error {
		return s.Update(ctx, func(tx store.Tx) error { _, err := tx.AppendEvent("a", "r", body); return err })
	}
	must(t, appendOne())
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		if last, _ := tx.LastSeq(); last != 1 {
			return fmt.Errorf("LastSeq %d", last)
		}
		if err := appendOne(); err != nil { // commits on the writer connection
			return err
		}
		if last, _ := tx.LastSeq(); last != 1 {
			return fmt.Errorf("snapshot moved: LastSeq %d", last)
		}
		if evs, _ := tx.Events("a", "r", 0, 10); len(evs) != 1 {
			return fmt.Errorf("snapshot sees %d events", len(evs))
		}
		if r, _, _ := tx.Run("a", "r"); r.Count != 1 {
			return fmt.Errorf("snapshot sees run %+v", r)
		}
		return nil
	}))
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		if evs, _ := tx.Events("a", "r", 0, 10); len(evs) != 2 {
			return fmt.Errorf("next view sees %d events", len(evs))
		}
		return nil
	}))
}

// TestCloseWakesWatchers: a watcher parked on Changed is woken by Close and
// its next read fails with ErrClosed.
func TestCloseWakesWatchers(t *testing.T) {
	s := open(t, t.TempDir(), "")
	ch := s.Changed()
	must(t, s.Close())
	select {
	case <-ch:
	case <-time.After(2 * time.Minute): // a hang guard, no timing assertion
		t.Fatal("Close did not wake the watcher")
	}
	if err := s.View(ctx, func(store.ReadTx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("View after Close: %v", err)
	}
	if err := s.Update(ctx, func(store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Update after Close: %v", err)
	}
	if _, err := s.AcquireLease(ctx, "x", "A"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("AcquireLease after Close: %v", err)
	}
}

// TestReadersDuringWrites: concurrent Views always see a whole prefix of
// the log (events 1..LastSeq, the run record agreeing) while a writer
// appends.
func TestReadersDuringWrites(t *testing.T) {
	s := open(t, t.TempDir(), sqlite.SyncNormal)
	defer s.Close()
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.CreateRun("a", store.Run{ID: "r"}) }))
	const commits = 200
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				err := s.View(ctx, func(tx store.ReadTx) error {
					last, err := tx.LastSeq()
					if err != nil {
						return err
					}
					r, _, _ := tx.Run("a", "r")
					evs, err := tx.Events("a", "r", 0, commits+1)
					if err != nil {
						return err
					}
					if r.Count != last || uint64(len(evs)) != last || (last > 0 && evs[last-1].Seq != last) {
						return fmt.Errorf("torn snapshot: LastSeq %d, run %+v, %d events", last, r, len(evs))
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range commits {
		must(t, s.Update(ctx, func(tx store.Tx) error { _, err := tx.AppendEvent("a", "r", body); return err }))
	}
	close(done)
	testkit.Wait(t, &wg)
}

// TestMigrateCheckpointsAndRunStates opens a database whose runs'
// checkpoints and states are clusters records: Open moves each of an
// existing run to the checkpoints and run_states tables.
func TestMigrateCheckpointsAndRunStates(t *testing.T) {
	dir := t.TempDir()
	old, err := sqlite.OpenAtVersion(ctx, sqlite.Options{Dir: dir}, sqlite.CheckpointsVersion-1)
	must(t, err)
	must(t, old.Close())
	db := rawDB(t, dir)
	for _, r := range storetest.LegacyRuns {
		_, err := db.Exec(`INSERT INTO runs (tenant, id, seed) VALUES (?, ?, x'')`, r[0], r[1])
		must(t, err)
	}
	for _, r := range storetest.LegacyRecords {
		_, err := db.Exec(`INSERT INTO clusters (tenant, version, data) VALUES (?, ?, ?)`, r.Key, r.Ver(), r.Data)
		must(t, err)
	}
	must(t, db.Close())
	s := open(t, dir, "")
	defer s.Close()
	storetest.CheckLegacyMigrated(t, s)
}

// TestTransactionsRunOnTheStoresGoroutines: a View's and an Update's
// function run on goroutines of the store's own, never on the caller's
// (whose stack each transaction would otherwise grow); a panic in one
// reaches its caller, a runtime.Goexit (a test's FailNow) ends its caller,
// and neither stops the store's one writer from taking the next write.
func TestTransactionsRunOnTheStoresGoroutines(t *testing.T) {
	s := open(t, t.TempDir(), sqlite.SyncNormal)
	// goroutine is the first line of a goroutine's stack: "goroutine N [running]:".
	goroutine := func() string {
		buf := make([]byte, 64)
		line, _, _ := strings.Cut(string(buf[:runtime.Stack(buf, false)]), "[")
		return line
	}
	caller := goroutine()
	var viewed, updated string
	must(t, s.View(ctx, func(store.ReadTx) error { viewed = goroutine(); return nil }))
	must(t, s.Update(ctx, func(store.Tx) error { updated = goroutine(); return nil }))
	if viewed == caller || updated == caller || viewed == "" || updated == "" {
		t.Errorf("the caller is %q; the View's function ran on %q, the Update's on %q", caller, viewed, updated)
	}

	recovered := func(call func()) any {
		var p any
		func() {
			defer func() { p = recover() }()
			call()
		}()
		if sp, ok := p.(*sqlite.Panic); ok {
			return sp.Value
		}
		return p
	}
	if p := recovered(func() { _ = s.View(ctx, func(store.ReadTx) error { panic("in a view") }) }); p != "in a view" {
		t.Errorf("the View's caller recovered %v", p)
	}
	if p := recovered(func() { _ = s.Update(ctx, func(store.Tx) error { panic("in an update") }) }); p != "in an update" {
		t.Errorf("the Update's caller recovered %v", p)
	}
	put := func(version uint64) error {
		return s.Update(ctx, func(tx store.Tx) error { return tx.PutCluster("t", store.Cluster{Version: version}) })
	}
	must(t, put(1))

	ended, after := make(chan struct{}), false
	go func() {
		defer close(ended)
		_ = s.Update(ctx, func(store.Tx) error { runtime.Goexit(); return nil })
		after = true
	}()
	testkit.Recv(t, ended)
	if after {
		t.Error("the Update's caller went on after its function called runtime.Goexit")
	}
	must(t, put(2))
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		if c, ok, err := tx.Cluster("t"); err != nil || !ok || c.Version != 2 {
			return fmt.Errorf("cluster t after the writes: %+v %v %v", c, ok, err)
		}
		return nil
	}))
	must(t, s.Close())
}

// TestTheWriterReadsThroughAMap: the writer connection maps the database
// file, and a store reopened over what a mapped writer wrote reads it all.
func TestTheWriterReadsThroughAMap(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, sqlite.SyncNormal)
	if n, err := sqlite.WriterMapSize(s); err != nil || n != sqlite.WriterMapBytes {
		t.Fatalf("the writer's mmap_size is %d (%v), want %d", n, err, sqlite.WriterMapBytes)
	}
	for i := range 2000 {
		must(t, s.Update(ctx, func(tx store.Tx) error {
			return tx.PutCluster(fmt.Sprintf("t%04d", i), store.Cluster{Version: 1, Data: []byte(fmt.Sprintf("%04d", i) + strings.Repeat("x", 600))})
		}))
	}
	// The writer reads back pages of the file itself, past its cache.
	must(t, s.Update(ctx, func(tx store.Tx) error {
		for i := range 2000 {
			c, ok, err := tx.Cluster(fmt.Sprintf("t%04d", i))
			if err != nil || !ok || !strings.HasPrefix(string(c.Data), fmt.Sprintf("%04d", i)) {
				return fmt.Errorf("cluster t%04d in the writer: %+v %v %v", i, c, ok, err)
			}
		}
		return nil
	}))
	must(t, s.Close())
	s = open(t, dir, sqlite.SyncNormal)
	defer s.Close()
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		c, ok, err := tx.Cluster("t1999")
		if err != nil || !ok || !strings.HasPrefix(string(c.Data), "1999") {
			return fmt.Errorf("cluster t1999 after reopening: %+v %v %v", c, ok, err)
		}
		return nil
	}))
}

// TestPingBesideWrites: health pings, whose write probe uses the writer
// connection, run beside writes and evidence reads without a race or a
// failure: every statement of a connection runs on the store's goroutines.
func TestPingBesideWrites(t *testing.T) {
	s := open(t, t.TempDir(), sqlite.SyncNormal)
	defer s.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 3 {
		wg.Add(3)
		go func() {
			defer wg.Done()
			for range 30 {
				if err := s.Ping(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := range 30 {
				if err := s.Update(ctx, func(tx store.Tx) error {
					return tx.PutCluster(fmt.Sprintf("t%d-%d", g, i), store.Cluster{Version: 1})
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 30 {
				if _, err := s.LastEvidence(ctx, "t", "r"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	testkit.Wait(t, &wg)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
