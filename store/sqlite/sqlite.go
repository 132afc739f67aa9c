// Package sqlite is the durable store: the store port (store.Store and
// store.Leaser) on an embedded SQLite database (modernc.org/sqlite, pure
// Go). It is the default store of `oecp serve`, kept in one data directory
// that it alone touches:
//
//	DIR/lock       flock held while a Store is open, with the holder's pid
//	DIR/oecp.db    the database (plus oecp.db-wal and oecp.db-shm beside it)
//
// Every Update is one SQLite transaction (BEGIN IMMEDIATE … COMMIT) on a
// single writer connection guarded by a mutex, so cluster state, the events
// it appends and the idempotency receipt commit together or not at all, and
// writers are serialized. View runs a read transaction on a pool of
// read-only connections: with the write-ahead log (WAL) a reader sees one
// consistent snapshot and never blocks, nor is blocked by, the writer.
// Watchers are woken (Changed) after the commit returns.
//
// Durability is chosen with Options.Sync:
//
//   - "full" (the default): PRAGMA synchronous=FULL. The WAL is fsynced at
//     every commit, so a commit that Update acknowledged survives a process
//     crash, a kernel panic and a power loss.
//   - "normal": PRAGMA synchronous=NORMAL. The WAL is fsynced only at
//     checkpoints. An acknowledged commit survives a process crash (even
//     SIGKILL: it is in the operating system's page cache), but the last
//     commits before a power loss or kernel crash may be lost. The database
//     is never corrupted either way. Faster when fsync is slow.
//
// The data directory is locked exclusively (flock on DIR/lock) for the life
// of the Store: a second Open of the same directory, from this process or
// another, fails at once with a *LockedError naming the holder's pid. The
// kernel releases the lock when its process dies, however it dies.
//
// The schema is versioned (PRAGMA user_version) with an ordered list of
// migrations applied in one transaction at Open; a database written by a
// newer binary is refused (ErrSchemaTooNew). The event log is append-only:
// events are deleted only by a tombstone and by retention, which deletes a
// run whole (store.Pruner) once it ended longer ago than the host keeps
// runs; nothing else bounds the log.
//
// A consistent backup is a copy of every DIR/oecp.db* file while no Store
// is open, or an online `sqlite3 DIR/oecp.db ".backup FILE"` (oecp.db
// alone is not a backup while a Store is open: recent commits may be only
// in oecp.db-wal). To restore, with no Store open, remove oecp.db-wal and
// oecp.db-shm and put the backup in place as oecp.db.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/oecp/oecp/store"
)

// File names inside the data directory.
const (
	lockFile = "lock"
	dbFile   = "oecp.db"
)

// busyTimeoutMS is how long a connection waits for a lock held by another
// connection of this process (a WAL checkpoint, or Open racing a reader)
// before failing with SQLITE_BUSY. Other processes never hold locks: the
// data directory is ours alone.
const busyTimeoutMS = 10_000

// pageCacheKiB bounds the database pages each connection keeps cached
// (PRAGMA cache_size, in KiB): SQLite's default, 2 MiB. A larger cache
// costs more than it saves with a deep queue: SQLite walks the cache's
// hash table at each commit (and drops a reader's whole cache whenever
// another connection committed), so the walk grows with the cache, while
// the pages read back instead come from the operating system's cache.
const pageCacheKiB = 2 << 10

// writerMapBytes is how much of the database file the writer connection
// reads through a memory map (PRAGMA mmap_size) rather than by a system
// call and a copy per page. With a deep queue the writer's trees outgrow
// its page cache, and every run's progress waits for the writer: a run's
// pages, written when it was submitted, are read back from the file when
// it is claimed thousands of runs later. The readers read by system call:
// only the writer is on every run's path. A disk's read error on a mapped
// page ends the process (SIGBUS) instead of failing the transaction; no
// other process truncates the file under the map, as the data directory
// is locked to this one.
const writerMapBytes = 256 << 20

// maxReaders bounds the read connection pool and the goroutines that run
// Views (concurrent Views beyond it wait for one).
var maxReaders = max(4, runtime.GOMAXPROCS(0))

// Sync modes (Options.Sync).
const (
	SyncFull   = "full"
	SyncNormal = "normal"
)

// Options configures Open.
type Options struct {
	// Dir is the data directory, created (0700) if missing. Empty means
	// DefaultDir().
	Dir string
	// Sync is SyncFull (also when empty) or SyncNormal; see the package
	// documentation for what each survives.
	Sync string
	// Log receives open/migration/lease-takeover messages; nil discards.
	Log *slog.Logger
}

// DefaultDir is the default data directory: $XDG_STATE_HOME/oecp if
// XDG_STATE_HOME is set to an absolute path, else ~/.local/state/oecp.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "oecp"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("default data directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "oecp"), nil
}

// ErrLocked: the data directory is in use by another open Store (errors.Is
// matches a *LockedError).
var ErrLocked = errors.New("data directory is in use")

// LockedError is returned by Open when another Store holds the directory.
type LockedError struct {
	Dir string
	PID int // the holder's pid, 0 if it could not be read
}

func (e *LockedError) Error() string {
	pid := "unknown pid"
	if e.PID != 0 {
		pid = fmt.Sprintf("pid %d", e.PID)
	}
	return fmt.Sprintf("data directory %s is in use by another oecp serve (%s)", e.Dir, pid)
}

func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Store is the SQLite store. It implements store.Store and store.Leaser.
type Store struct {
	dir  string
	log  *slog.Logger
	lock *dirLock

	// gate makes Close wait for the transactions in flight.
	gate store.Gate

	// writer runs every statement of the writer connection after Open,
	// one at a time, and readers those of the read pool (runner.go).
	writer, readers *runner

	wdb     *sql.DB
	wconn   *sql.Conn
	wstmts  [nStmts]*sql.Stmt
	lastSeq uint64 // committed sequence; the writer goroutine's

	rdb    *sql.DB
	rstmts [nStmts]*sql.Stmt // read statements, prepared on the pool

	// ckpt copies the WAL into the database file beside the writer; nil
	// until Open has prepared everything else.
	ckpt *walCheckpointer

	signal store.Signal // Changed

	obs store.Observer // set before use; nil: none
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Leaser     = (*Store)(nil)
	_ store.Observable = (*Store)(nil)
)

// Open opens (creating or migrating as needed) the store in opt.Dir and
// locks the directory until Close.
func Open(ctx context.Context, opt Options) (*Store, error) {
	return open(ctx, opt, SchemaVersion)
}

func open(ctx context.Context, opt Options, schema int) (_ *Store, err error) {
	syncMode, syncPragma, err := syncPragmaOf(opt.Sync)
	if err != nil {
		return nil, err
	}
	dir, err := dataDir(opt.Dir)
	if err != nil {
		return nil, err
	}
	logger := opt.Log
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store/sqlite: create data directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store/sqlite: %w", err)
	}
	s := &Store{dir: dir, log: logger, lock: lock, writer: newRunner(1), readers: newRunner(maxReaders)}
	defer func() {
		if err != nil {
			s.release()
		}
	}()

	path := filepath.Join(dir, dbFile)
	if err := s.openWriter(ctx, path, syncPragma); err != nil {
		return nil, classify(err)
	}
	from, err := migrate(ctx, s.wconn, schema)
	if err != nil {
		return nil, classify(fmt.Errorf("store/sqlite: %s: %w", path, err))
	}
	if from != schema {
		logger.Info("ledger schema migrated", "path", path, "from", from, "to", schema)
	}
	// A store that could not write, or whose pages are damaged, must not
	// start: it would serve reads and fail every write.
	if err := s.quickCheck(ctx); err != nil {
		return nil, fmt.Errorf("store/sqlite: %s: %w", path, err)
	}
	if err := s.probe(); err != nil {
		return nil, fmt.Errorf("store/sqlite: %s cannot be written: %w", path, err)
	}
	if schema != SchemaVersion {
		// Test hook (an old-version database): no statements needed.
		return s, nil
	}
	if err := s.prepareWriter(ctx); err != nil {
		return nil, err
	}
	if err := s.openReaders(ctx, path); err != nil {
		return nil, err
	}
	if s.ckpt, err = openWALCheckpointer(ctx, path, syncPragma, s.checkpointFailed, s.noWALIndex); err != nil {
		return nil, err
	}
	logger.Info("ledger open", "path", path, "schema", schema, "sync", syncMode, "last_seq", s.lastSeq)
	return s, nil
}

// syncPragmaOf maps Options.Sync to its mode name and PRAGMA synchronous
// value.
func syncPragmaOf(v string) (mode, pragma string, err error) {
	switch v {
	case "", SyncFull:
		return SyncFull, "FULL", nil
	case SyncNormal:
		return SyncNormal, "NORMAL", nil
	}
	return "", "", fmt.Errorf("store/sqlite: unknown sync mode %q (want %q or %q)", v, SyncFull, SyncNormal)
}

// dataDir is dir made absolute, or DefaultDir() when dir is empty.
func dataDir(dir string) (string, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultDir(); err != nil {
			return "", err
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("store/sqlite: %w", err)
	}
	return abs, nil
}

// openWriter opens the one writer connection with the busy timeout and the
// sync pragma, and puts the database in WAL mode.
func (s *Store) openWriter(ctx context.Context, path, syncPragma string) (err error) {
	s.wdb, err = sql.Open("sqlite", fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=synchronous(%s)&_pragma=cache_size(-%d)&_pragma=wal_autocheckpoint(%d)&_pragma=mmap_size(%d)", path, busyTimeoutMS, syncPragma, pageCacheKiB, backstopPages, writerMapBytes))
	if err != nil {
		return fmt.Errorf("store/sqlite: %w", err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	if s.wconn, err = s.wdb.Conn(ctx); err != nil {
		return fmt.Errorf("store/sqlite: open %s: %w", path, err)
	}
	var mode string
	if err := s.wconn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return fmt.Errorf("store/sqlite: open %s: %w", path, err)
	}
	if mode != "wal" {
		return fmt.Errorf("store/sqlite: %s: journal mode %q, want wal", path, mode)
	}
	return nil
}

// prepareWriter prepares every statement on the writer connection and
// reads the committed sequence.
func (s *Store) prepareWriter(ctx context.Context) (err error) {
	for i, q := range stmtSQL {
		if s.wstmts[i], err = s.wconn.PrepareContext(ctx, q); err != nil {
			return fmt.Errorf("store/sqlite: prepare %q: %w", q, err)
		}
	}
	var last int64
	if err := s.wstmts[stLastSeq].QueryRowContext(ctx).Scan(&last); err != nil {
		return fmt.Errorf("store/sqlite: read sequence: %w", err)
	}
	s.lastSeq = uint64(last)
	return nil
}

// openReaders opens the query-only reader pool and prepares the read
// statements on it.
func (s *Store) openReaders(ctx context.Context, path string) (err error) {
	s.rdb, err = sql.Open("sqlite", fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=query_only(1)&_pragma=cache_size(-%d)", path, busyTimeoutMS, pageCacheKiB))
	if err != nil {
		return fmt.Errorf("store/sqlite: %w", err)
	}
	s.rdb.SetMaxOpenConns(maxReaders)
	s.rdb.SetMaxIdleConns(maxReaders)
	s.rdb.SetConnMaxIdleTime(0)
	for i, q := range stmtSQL {
		if readOnlyStmt[i] {
			if s.rstmts[i], err = s.rdb.PrepareContext(ctx, q); err != nil {
				return fmt.Errorf("store/sqlite: prepare %q: %w", q, err)
			}
		}
	}
	return nil
}

// Dir is the data directory (absolute).
func (s *Store) Dir() string { return s.dir }

// release closes everything Open acquired, the directory lock last.
func (s *Store) release() error {
	// Nothing runs on them now: Close's gate has closed, and Open's
	// failure left no transaction behind.
	s.writer.close()
	s.readers.close()
	var errs []error
	if s.ckpt != nil {
		errs = append(errs, s.ckpt.close())
	}
	for _, st := range s.rstmts {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	for _, st := range s.wstmts {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.wconn != nil {
		errs = append(errs, s.wconn.Close())
	}
	if s.wdb != nil {
		// Closing the last connection checkpoints the WAL into the
		// database file.
		errs = append(errs, s.wdb.Close())
	}
	errs = append(errs, s.lock.unlock())
	return errors.Join(errs...)
}

// Close waits for transactions in flight, closes the database and unlocks
// the data directory.
func (s *Store) Close() error {
	if err := s.gate.Close(); err != nil {
		return err
	}
	err := s.release()
	// Wake the watchers: their next read fails with ErrClosed instead of
	// waiting for a commit that will never come.
	s.signal.Wake()
	if err != nil {
		return fmt.Errorf("store/sqlite: close: %w", err)
	}
	return nil
}

// Changed returns a channel closed after the next commit that wrote
// something.
func (s *Store) Changed() <-chan struct{} { return s.signal.Changed() }

// Update runs fn in one write transaction. ctx is checked before it starts;
// a started transaction is not interrupted (fn is expected to be short).
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	var wrote bool
	var taken []takeover
	err := s.write(ctx, func(t *txn) error {
		err := fn(t)
		wrote, taken = t.dirty, t.takeovers
		return err
	})
	if err == nil {
		s.reportTakeovers(taken)
	}
	if err == nil && wrote {
		s.signal.Wake()
	}
	return err
}

// write runs fn in a BEGIN IMMEDIATE transaction on the writer connection
// and commits it if fn succeeds and wrote anything.
func (s *Store) write(ctx context.Context, fn func(*txn) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Exit()
	// Statements run without the caller's context (writeTx), and the
	// wait for the writer is not given up either: a write waits for the
	// ones before it.
	_ = s.writer.run(context.Background(), func() { err = s.writeTx(fn) })
	return err
}

// writeTx runs fn in a write transaction of its own and commits it if fn
// succeeds and wrote anything.
func (s *Store) writeTx(fn func(*txn) error) (err error) {
	// Statements run without the caller's context: a cancellation must not
	// interrupt a transaction half way, and a context with a Done channel
	// costs the driver a goroutine per statement.
	bg := context.Background()
	start := time.Now()
	if _, err := s.wstmts[stBegin].ExecContext(bg); err != nil {
		store.ReportCommit(s.obs, start, true)
		return dbErr("begin", err)
	}
	t := &txn{s: s, seq: s.lastSeq}
	committed := false
	defer func() {
		if !committed {
			if _, rerr := s.wstmts[stRollback].ExecContext(bg); rerr != nil {
				err = errors.Join(err, fmt.Errorf("store/sqlite: rollback: %w", rerr))
			}
		}
	}()
	if err := fn(t); err != nil {
		return err
	}
	if !t.dirty && !t.leased {
		return nil // rolled back: nothing to keep
	}
	if _, err := s.wstmts[stCommit].ExecContext(bg); err != nil {
		// SQLite may have rolled back already; the deferred ROLLBACK
		// then fails harmlessly, but report the commit error alone.
		committed = true
		_, _ = s.wstmts[stRollback].ExecContext(bg)
		store.ReportCommit(s.obs, start, true)
		return dbErr("commit", err)
	}
	committed = true
	s.lastSeq = t.seq
	if s.ckpt != nil {
		s.ckpt.committed()
	}
	store.ReportCommit(s.obs, start, false)
	return nil
}

// View runs fn against one consistent snapshot on a read connection. ctx is
// checked before it starts and while it waits for a read goroutine.
func (s *Store) View(ctx context.Context, fn func(store.ReadTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Exit()
	var err error
	if werr := s.readers.run(ctx, func() { err = s.view(fn) }); werr != nil {
		return werr
	}
	return err
}

// view runs fn in a read transaction of its own.
func (s *Store) view(fn func(store.ReadTx) error) error {
	// A deferred read transaction takes its WAL snapshot at its first
	// read and keeps it until the end.
	rtx, err := s.rdb.BeginTx(context.Background(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return dbErr("begin read", err)
	}
	defer rtx.Rollback()
	return fn(&txn{s: s, rtx: rtx})
}

// checkpointFailed logs a checkpoint that failed; the next one is tried
// after as many commits again, and the writer's own automatic checkpoint
// still bounds the WAL.
func (s *Store) checkpointFailed(err error) {
	s.log.Warn("ledger checkpoint failed", "err", err)
}

// noWALIndex logs that the checkpointer cannot read the WAL index and
// checkpoints every fallbackCommits commits instead.
func (s *Store) noWALIndex(err error) {
	s.log.Warn("ledger checkpoints by commit count: cannot read the WAL index", "err", err)
}
