package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/oecp/oecp/store/sqlite"
)

// One data directory, one server. Everything a server keeps on disk —
// the SQLite ledger, the runs' workspaces and runtime directories (on
// every store but memory) — lives in its data directory (--data), and a
// second server on the same directory would take the first one's
// workspaces for its own (and, with SQLite, its ledger). So a server
// takes an exclusive lock on dataLockFile in its data directory before
// it opens anything there, and holds it while it runs; a second server
// on the directory refuses to start, naming the directory and the
// holder's pid. The kernel drops the lock when the process dies, however
// it dies, so a stale file never blocks a restart. Replicas sharing one
// PostgreSQL ledger on one host each need a data directory of their own.

// dataLockFile is the lock file of a serving data directory (beside the
// SQLite store's own lock, which guards the store alone).
const dataLockFile = "serve.lock"

// dataDirOf is the data directory the configured backend uses ("" when
// it keeps nothing on disk: --store memory, --backend fixture).
func dataDirOf(cfg backendConfig) (string, error) {
	if cfg.kind == "fixture" || cfg.store == "memory" {
		return "", nil
	}
	if cfg.dataDir != "" {
		return cfg.dataDir, nil
	}
	d, err := sqlite.DefaultDir()
	if err != nil {
		return "", fmt.Errorf("no --data directory given and no default: %w", err)
	}
	return d, nil
}

// DataDirInUseError: another server holds the data directory.
type DataDirInUseError struct {
	Dir string
	PID int // the holder's pid, 0 if unknown
}

func (e *DataDirInUseError) Error() string {
	holder := "another oecp serve"
	if e.PID != 0 {
		holder = fmt.Sprintf("another oecp serve (pid %d)", e.PID)
	}
	return fmt.Sprintf("data directory %s is in use by %s: one data directory serves one server; "+
		"stop that server, or give this one a --data directory of its own", e.Dir, holder)
}

// lockDataDir takes the data directory's lock for the life of the
// server; unlock releases it.
func lockDataDir(cfg backendConfig) (unlock func(), err error) {
	dir, err := dataDirOf(cfg)
	if err != nil || dir == "" {
		return func() {}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return lockFile(abs, filepath.Join(abs, dataLockFile))
}
