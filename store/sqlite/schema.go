package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// migrations is the ordered schema history: migrations[i] moves a database
// from user_version i to i+1. Entries are never edited once released, only
// appended; Open applies the missing tail in one transaction.
var migrations = []string{
	// 1: the ledger.
	`
CREATE TABLE clusters (
	tenant  TEXT PRIMARY KEY,
	version INTEGER NOT NULL,
	data    BLOB
) STRICT;

CREATE TABLE idempotency (
	tenant      TEXT NOT NULL,
	key         TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	result      BLOB,
	PRIMARY KEY (tenant, key)
) STRICT, WITHOUT ROWID;

-- first_seq, last_seq and count are maintained as events are appended; a
-- tombstoned run keeps them (its events are deleted).
CREATE TABLE runs (
	tenant     TEXT NOT NULL,
	id         TEXT NOT NULL,
	seed       BLOB,
	first_seq  INTEGER NOT NULL DEFAULT 0,
	last_seq   INTEGER NOT NULL DEFAULT 0,
	count      INTEGER NOT NULL DEFAULT 0,
	tombstoned INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant, id)
) STRICT;
CREATE INDEX runs_by_first_seq ON runs (tenant, first_seq) WHERE count > 0;

-- The append-only log. seq is the one global sequence and the watch
-- cursor; the store assigns it (last + 1, see sequence below) and never
-- reuses a number, not even one of a deleted event.
CREATE TABLE events (
	seq    INTEGER PRIMARY KEY,
	tenant TEXT NOT NULL,
	run_id TEXT NOT NULL,
	idx    INTEGER NOT NULL,
	body   BLOB
) STRICT;
CREATE INDEX events_by_run ON events (tenant, run_id, seq);

-- The highest sequence ever assigned is max(events.seq, sequence.last):
-- last is raised only when a tombstone deletes events, so that an append
-- writes no page here and the numbers of deleted events are never reused.
CREATE TABLE sequence (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	last INTEGER NOT NULL
) STRICT;
INSERT INTO sequence (id, last) VALUES (1, 0);

CREATE TABLE counters (
	name  TEXT PRIMARY KEY,
	value INTEGER NOT NULL
) STRICT;
`,
	// 2: supervision leases (store.Leaser).
	`
CREATE TABLE leases (
	name  TEXT PRIMARY KEY,
	owner TEXT NOT NULL,
	epoch INTEGER NOT NULL
) STRICT;
`,
	// 3: runs' agent evidence (store.Evidence), deleted with the run.
	`
CREATE TABLE evidence (
	id        INTEGER PRIMARY KEY,
	tenant    TEXT NOT NULL,
	run_id    TEXT NOT NULL,
	execution TEXT NOT NULL,
	turn      INTEGER NOT NULL,
	kind      TEXT NOT NULL,
	attr      TEXT NOT NULL,
	data      BLOB
) STRICT;
CREATE INDEX evidence_by_run ON evidence (tenant, run_id, id);
`,
	// 4: indexes (store.ReadTx.IndexEntry and the rest): entries with a
	// number each, read by entry and in number order. Nothing indexes the
	// number: the unfinished-run index changes an entry's number at every
	// commit of its run, and a second B-tree would be rewritten each time
	// (at 16,000 queued runs PostgreSQL served 0.67 of its shallow rate
	// with one, 1.01 without); IndexBelow reads the key's entries and
	// keeps the lowest (a bounded sort).
	`
CREATE TABLE indexes (
	key   TEXT NOT NULL,
	entry TEXT NOT NULL,
	n     INTEGER NOT NULL,
	PRIMARY KEY (key, entry)
) STRICT, WITHOUT ROWID;
`,
	// 5: checkpoints: runs' checkpoint bundles (store.Tx.PutCheckpoint),
	// deleted with the run. The bundles kept before in the clusters table,
	// each under its run's tenant key + "/" + run id + "#checkpoint" (a
	// run id holds no '/'), move here when their run exists; a record
	// whose run is gone stays, read by no one.
	`
CREATE TABLE checkpoints (
	tenant TEXT NOT NULL,
	run_id TEXT NOT NULL,
	bundle BLOB NOT NULL,
	PRIMARY KEY (tenant, run_id)
) STRICT;

-- rtrim(k, replace(k, '/', '')) is k up to and including its last '/'.
INSERT INTO checkpoints (tenant, run_id, bundle)
SELECT r.tenant, r.id, coalesce(l.data, x'')
FROM (SELECT tenant AS k, data, length(rtrim(tenant, replace(tenant, '/', ''))) AS slash
	FROM clusters WHERE tenant GLOB '*/*#checkpoint') AS l
JOIN runs r ON r.tenant = substr(l.k, 1, l.slash - 1)
	AND r.id = substr(l.k, l.slash + 1, length(l.k) - l.slash - length('#checkpoint'));

DELETE FROM clusters WHERE tenant IN (SELECT tenant || '/' || run_id || '#checkpoint' FROM checkpoints);
`,
	// 6: run_states: native runs' state records (store.Tx.PutRunState),
	// deleted with the run. The records kept before in the clusters
	// table, each under its run's tenant key + "/" + run id, move here
	// when their run exists. Only keys of a native tenant key ("n:" + the
	// quoted tenant, or "n*") are read: a v1 tenant's cluster record is
	// keyed "t:" + its name, which may hold a '/' and end in a v1 run's
	// id. A record whose run is gone stays, read by no one.
	`
CREATE TABLE run_states (
	tenant  TEXT NOT NULL,
	run_id  TEXT NOT NULL,
	version INTEGER NOT NULL,
	data    BLOB NOT NULL,
	PRIMARY KEY (tenant, run_id)
) STRICT;

INSERT INTO run_states (tenant, run_id, version, data)
SELECT r.tenant, r.id, l.version, coalesce(l.data, x'')
FROM (SELECT tenant AS k, version, data, length(rtrim(tenant, replace(tenant, '/', ''))) AS slash
	FROM clusters WHERE tenant GLOB 'n:*/*' OR tenant GLOB 'n[*]/*') AS l
JOIN runs r ON r.tenant = substr(l.k, 1, l.slash - 1)
	AND r.id = substr(l.k, l.slash + 1);

DELETE FROM clusters WHERE tenant IN (SELECT tenant || '/' || run_id FROM run_states);
`,
}

// SchemaVersion is the schema version this binary writes.
var SchemaVersion = len(migrations)

// ErrSchemaTooNew: the database was written by a newer oecp whose schema
// this binary does not know; opening it could corrupt it.
var ErrSchemaTooNew = errors.New("database schema is newer than this oecp binary")

// migrate brings the database on conn up to version target (at most
// SchemaVersion) in one transaction and returns the version it found.
func migrate(ctx context.Context, conn *sql.Conn, target int) (from int, err error) {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return 0, fmt.Errorf("begin migration: %w", err)
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&from); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if from > SchemaVersion {
		return from, fmt.Errorf("%w: database has schema version %d, this binary knows up to %d; upgrade oecp", ErrSchemaTooNew, from, SchemaVersion)
	}
	for v := from; v < target; v++ {
		if _, err := conn.ExecContext(ctx, migrations[v]); err != nil {
			return from, fmt.Errorf("migrate schema to version %d: %w", v+1, err)
		}
	}
	if target > from {
		// PRAGMA takes no parameters; target is an int we computed.
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", target)); err != nil {
			return from, fmt.Errorf("set schema version: %w", err)
		}
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return from, fmt.Errorf("commit migration: %w", err)
	}
	return from, nil
}
