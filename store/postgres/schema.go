package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
)

// migrations is the ordered schema history: migrations[i] moves a schema
// from version i to i+1. Entries are never edited once released, only
// appended; Open applies the missing tail in one transaction.
var migrations = []string{
	// 1: the ledger. Every string is bytea: tenants, keys and ids may hold
	// any byte (NUL included), which text columns refuse.
	`
CREATE TABLE clusters (
	tenant  bytea PRIMARY KEY,
	version bigint NOT NULL,
	data    bytea
);

CREATE TABLE idempotency (
	tenant      bytea NOT NULL,
	key         bytea NOT NULL,
	fingerprint bytea NOT NULL,
	result      bytea,
	PRIMARY KEY (tenant, key)
);

-- A run and its event counters: first_seq, last_seq and count move as
-- events are appended and survive a tombstone (which deletes the events).
CREATE TABLE runs (
	tenant bytea NOT NULL,
	id     bytea NOT NULL,
	seed   bytea,
	first_seq bigint NOT NULL DEFAULT 0, last_seq bigint NOT NULL DEFAULT 0, count bigint NOT NULL DEFAULT 0,
	tombstoned boolean NOT NULL DEFAULT false,
	PRIMARY KEY (tenant, id)
);
CREATE INDEX runs_by_first_seq ON runs (tenant, first_seq) WHERE count > 0;

-- The append-only log. seq is the one global sequence and the watch
-- cursor, assigned from the sequence row below.
CREATE TABLE events (
	seq    bigint PRIMARY KEY,
	tenant bytea NOT NULL,
	run_id bytea NOT NULL,
	idx    bigint NOT NULL,
	body   bytea
);
CREATE INDEX events_by_run ON events (tenant, run_id, seq);

-- The highest sequence ever assigned. Every write transaction locks this
-- row first and holds it to its commit, so sequences are assigned in
-- commit order (see the package documentation).
CREATE TABLE sequence (
	id   int PRIMARY KEY CHECK (id = 1),
	last bigint NOT NULL
);
INSERT INTO sequence (id, last) VALUES (1, 0);

CREATE TABLE counters (
	name  bytea PRIMARY KEY,
	value bigint NOT NULL
);

-- Supervision leases; expires is in the database's clock.
CREATE TABLE leases (
	name    bytea PRIMARY KEY,
	owner   bytea NOT NULL,
	epoch   bigint NOT NULL,
	expires timestamptz NOT NULL
);
CREATE INDEX leases_by_owner ON leases (owner);
`,
	// 2: runs' agent evidence (store.Evidence), deleted with the run.
	`
CREATE TABLE evidence (
	id        bigserial PRIMARY KEY,
	tenant    bytea NOT NULL,
	run_id    bytea NOT NULL,
	execution bytea NOT NULL,
	turn      bigint NOT NULL,
	kind      bytea NOT NULL,
	attr      bytea NOT NULL,
	data      bytea NOT NULL
);
CREATE INDEX evidence_by_run ON evidence (tenant, run_id, id);
`,
	// 3: the lease owners that announce their liveness (liveness.go): the
	// key of the session-level advisory lock each holds while it lives,
	// and when (database clock) it took it.
	`
CREATE TABLE replicas (
	owner        bytea PRIMARY KEY,
	key          int NOT NULL,
	locked_since timestamptz NOT NULL
);
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
	key   bytea NOT NULL,
	entry bytea NOT NULL,
	n     bigint NOT NULL,
	PRIMARY KEY (key, entry)
);
`,
	// 5: checkpoints: runs' checkpoint bundles (store.Tx.PutCheckpoint),
	// deleted with the run. The bundles kept before in the clusters table,
	// each under its run's tenant key + "/" + run id + "#checkpoint" (a
	// run id holds no '/'), move here when their run exists; a record
	// whose run is gone stays, read by no one. The key is split at its
	// last '/' in its escape form, in which every byte but a backslash
	// and the non-printable ones stands for itself.
	`
CREATE TABLE checkpoints (
	tenant bytea NOT NULL,
	run_id bytea NOT NULL,
	bundle bytea NOT NULL,
	PRIMARY KEY (tenant, run_id)
);

INSERT INTO checkpoints (tenant, run_id, bundle)
SELECT r.tenant, r.id, coalesce(l.data, '')
FROM (SELECT data,
		decode(substring(encode(tenant, 'escape') from '^(.*)/[^/]*#checkpoint$'), 'escape') AS tk,
		decode(substring(encode(tenant, 'escape') from '/([^/]*)#checkpoint$'), 'escape') AS id
	FROM clusters WHERE tenant LIKE '%/%#checkpoint') AS l
JOIN runs r ON r.tenant = l.tk AND r.id = l.id;

DELETE FROM clusters c USING checkpoints p
WHERE c.tenant = p.tenant || '/'::bytea || p.run_id || '#checkpoint'::bytea;
`,
	// 6: run_states: native runs' state records (store.Tx.PutRunState),
	// deleted with the run. The records kept before in the clusters
	// table, each under its run's tenant key + "/" + run id, move here
	// when their run exists. Only keys of a native tenant key ("n:" + the
	// quoted tenant, or "n*") are read: a v1 tenant's cluster record is
	// keyed "t:" + its name, which may hold a '/' and end in a v1 run's
	// id. A record whose run is gone stays, read by no one. The
	// key is split at its last '/' as in migration 5.
	`
CREATE TABLE run_states (
	tenant  bytea NOT NULL,
	run_id  bytea NOT NULL,
	version bigint NOT NULL,
	data    bytea NOT NULL,
	PRIMARY KEY (tenant, run_id)
);

INSERT INTO run_states (tenant, run_id, version, data)
SELECT r.tenant, r.id, l.version, coalesce(l.data, '')
FROM (SELECT version, data,
		decode(substring(encode(tenant, 'escape') from '^(.*)/[^/]*$'), 'escape') AS tk,
		decode(substring(encode(tenant, 'escape') from '/([^/]*)$'), 'escape') AS id
	FROM clusters WHERE tenant LIKE 'n:%/%' OR tenant LIKE 'n*/%') AS l
JOIN runs r ON r.tenant = l.tk AND r.id = l.id;

DELETE FROM clusters c USING run_states s
WHERE c.tenant = s.tenant || '/'::bytea || s.run_id;
`,
}

// SchemaVersion is the schema version this binary writes.
var SchemaVersion = len(migrations)

// ErrSchemaTooNew: the schema was written by a newer oecp whose schema
// this binary does not know; using it could corrupt it.
var ErrSchemaTooNew = errors.New("database schema is newer than this oecp binary")

// migrationLockKey is the advisory lock that serializes the migrations of
// one schema: replicas starting at once migrate one after the other, and
// all but the first find nothing left to do.
func migrationLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("oecp migrate\x00" + schema))
	return int64(h.Sum64())
}

// migrate brings schema up to version target (at most SchemaVersion) in
// one transaction on conn, under the schema's migration lock, and returns
// the version it found.
func migrate(ctx context.Context, conn *pgx.Conn, schema string, target int) (from int, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin migration: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLockKey(schema)); err != nil {
		return 0, fmt.Errorf("lock migration: %w", err)
	}
	q := pgx.Identifier{schema}.Sanitize()
	stmts := []string{
		"CREATE SCHEMA IF NOT EXISTS " + q,
		"CREATE TABLE IF NOT EXISTS " + q + ".schema_version (version int NOT NULL)",
		"INSERT INTO " + q + ".schema_version SELECT 0 WHERE NOT EXISTS (SELECT FROM " + q + ".schema_version)",
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return 0, fmt.Errorf("prepare schema %s: %w", schema, err)
		}
	}
	if err := tx.QueryRow(ctx, "SELECT version FROM "+q+".schema_version").Scan(&from); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if from > SchemaVersion {
		return from, fmt.Errorf("%w: schema %s has version %d, this binary knows up to %d; upgrade oecp", ErrSchemaTooNew, schema, from, SchemaVersion)
	}
	if from >= target {
		return from, tx.Rollback(ctx)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+q); err != nil {
		return from, fmt.Errorf("migrate schema: %w", err)
	}
	for v := from; v < target; v++ {
		if _, err := tx.Exec(ctx, migrations[v]); err != nil {
			return from, fmt.Errorf("migrate schema %s to version %d: %w", schema, v+1, err)
		}
	}
	if _, err := tx.Exec(ctx, "UPDATE "+q+".schema_version SET version = $1", target); err != nil {
		return from, fmt.Errorf("set schema version: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return from, fmt.Errorf("commit migration: %w", err)
	}
	return from, nil
}
