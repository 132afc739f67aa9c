package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oecp/oecp/store"
)

// Statements. Write transactions begin with beginWrite and lockSeq in their
// first round trip; read transactions with beginRead.
const (
	beginWrite = `BEGIN ISOLATION LEVEL READ COMMITTED`
	beginRead  = `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`
	lockSeq    = `SELECT last FROM sequence WHERE id = 1 FOR UPDATE`
	readSeq    = `SELECT last FROM sequence WHERE id = 1`
	// beginSnapshot begins a write transaction without the sequence lock
	// whose statements all read the snapshot its first one took
	// (exchangeAlone's).
	beginSnapshot = `BEGIN ISOLATION LEVEL REPEATABLE READ`
	// asyncCommit ends the wait for the log's flush at this
	// transaction's commit.
	asyncCommit = `SET LOCAL synchronous_commit = off`
	saveSeq     = `UPDATE sequence SET last = $1 WHERE id = 1`
	notify      = `SELECT pg_notify(convert_from($1, 'UTF8'), convert_from($2, 'UTF8'))`

	qCluster       = `SELECT version, data FROM clusters WHERE tenant = $1`
	qInsertCluster = `INSERT INTO clusters (tenant, version, data) VALUES ($1, 1, $2)`
	qUpdateCluster = `UPDATE clusters SET version = $1, data = $2 WHERE tenant = $3 AND version = $4`
	qIdem          = `SELECT fingerprint, result FROM idempotency WHERE tenant = $1 AND key = $2`
	qInsertIdem    = `INSERT INTO idempotency (tenant, key, fingerprint, result) VALUES ($1, $2, $3, $4)`
	qRun           = `SELECT seed, first_seq, last_seq, count, tombstoned FROM runs WHERE tenant = $1 AND id = $2`
	qFirstRunAfter = `SELECT id, seed, first_seq, last_seq, count, tombstoned FROM runs
		WHERE tenant = $1 AND count > 0 AND first_seq > $2 ORDER BY first_seq LIMIT 1`
	qEvent       = `SELECT run_id, idx, body FROM events WHERE seq = $1 AND tenant = $2`
	qEvents      = `SELECT seq, idx, body FROM events WHERE tenant = $1 AND run_id = $2 AND seq > $3 ORDER BY seq LIMIT $4`
	qInsertRun   = `INSERT INTO runs (tenant, id, seed) VALUES ($1, $2, $3)`
	qInsertEvent = `INSERT INTO events (seq, tenant, run_id, idx, body) VALUES ($1, $2, $3, $4, $5)`
	qUpdateRun   = `UPDATE runs SET first_seq = $1, last_seq = $2, count = $3 WHERE tenant = $4 AND id = $5`
	qTombstone   = `UPDATE runs SET tombstoned = true WHERE tenant = $1 AND id = $2`
	qDropEvents  = `DELETE FROM events WHERE tenant = $1 AND run_id = $2`
	qNextCounter = `INSERT INTO counters (name, value) VALUES ($1, 1)
		ON CONFLICT (name) DO UPDATE SET value = counters.value + 1 RETURNING value`
	qLease      = `SELECT owner, epoch FROM leases WHERE name = $1`
	qLeaseShare = `SELECT owner, epoch FROM leases WHERE name = $1 FOR SHARE`
)

// query is one statement of a round trip: a query whose rows scan reads,
// or (scan nil) a statement whose result is only its success.
//
// Queued writes are never checked for the rows they touched: each was
// decided from records the transaction read under the sequence lock, which
// excludes every other writer of those records until the commit, so its
// guard (a version, an absent key) still holds when it runs. A write that
// breaks a constraint fails on the server and aborts the transaction,
// COMMIT included.
type query struct {
	sql  string
	args []any
	scan func(pgx.Rows) error
}

// row is a query reading at most one row into dest; *found says whether
// there was one.
func row(found *bool, sql string, args []any, dest ...any) query {
	return query{sql: sql, args: args, scan: func(rows pgx.Rows) error {
		if *found = rows.Next(); *found {
			return rows.Scan(dest...)
		}
		return nil
	}}
}

// txn is a transaction on one pooled connection. A write transaction
// holds the sequence lock from its first round trip, so what it reads
// cannot change under it: it caches records it read or wrote and queues
// its writes (pending), which go out before its next read or with its
// commit.
type txn struct {
	s     *Store
	ctx   context.Context
	conn  *pgx.Conn
	write bool

	begun, ended bool
	// err is the first database failure; the server has aborted the
	// transaction. retry says the whole transaction may run again.
	err   error
	retry bool

	pending  []query
	dirty    bool
	seq      uint64 // write: last sequence assigned
	seqMoved bool

	clusters map[string]*store.Cluster // nil value: known absent
	receipts map[[2]string]bool        // receipt known present (true) or absent
	runs     map[[2]string]*runEntry
	indexes  map[[2]string]*uint64       // index entries by key and entry; nil value: known absent
	states   map[[2]string]*store.Record // run state records (runstates.go); nil value: known absent
	// dirtyRuns are the runs whose row is rewritten before the next
	// send, each once, so that a round trip's cost follows the runs it
	// changed, not every run the transaction has read.
	dirtyRuns []dirtyRun
}

type dirtyRun struct {
	key [2]string
	r   *runEntry
}

// runEntry is a run as this transaction knows it.
type runEntry struct {
	rec    store.Run
	exists bool
	dirty  bool // first/last/count changed: rewritten before the next send
}

// send runs, in one round trip: BEGIN (and the sequence lock) if not yet
// sent, the queued writes, then qs.
func (t *txn) send(op string, qs ...query) error {
	if t.err != nil {
		return t.err
	}
	all := t.prologue(qs)
	if err := t.exchange(all); err != nil {
		return t.fail(op, err)
	}
	t.begun = true
	return nil
}

// prologue is the BEGIN statements (first round trip only) and the queued
// writes, followed by qs.
func (t *txn) prologue(qs []query) []query {
	var all []query
	if !t.begun {
		if t.write {
			all = append(all, query{sql: beginWrite}, query{sql: lockSeq, scan: t.scanSeq})
		} else {
			all = append(all, query{sql: beginRead})
		}
	}
	for _, d := range t.dirtyRuns {
		if r := d.r; r.dirty {
			r.dirty = false
			t.pending = append(t.pending, query{sql: qUpdateRun,
				args: []any{r.rec.FirstSeq, r.rec.LastSeq, r.rec.Count, d.key[0], d.key[1]}})
		}
	}
	t.dirtyRuns = t.dirtyRuns[:0]
	all = append(all, t.pending...)
	t.pending = nil
	return append(all, qs...)
}

// bytesArgs turns string arguments into bytes: every string column is
// bytea (see the schema), and strings come back through str.
func bytesArgs(args []any) []any {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = []byte(s)
		}
	}
	return args
}

// str scans a bytea column into a string.
type str struct{ p *string }

func (x str) ScanBytes(v []byte) error {
	*x.p = string(v)
	return nil
}

// scanSeq reads the locked sequence row.
func (t *txn) scanSeq(rows pgx.Rows) error {
	if !rows.Next() {
		return errors.New("sequence row missing")
	}
	return rows.Scan(&t.seq)
}

// exchange sends qs as one pipelined batch and reads every result.
func (t *txn) exchange(qs []query) error {
	b := &pgx.Batch{}
	for _, q := range qs {
		b.Queue(q.sql, bytesArgs(q.args)...)
	}
	br := t.conn.SendBatch(t.ctx, b)
	err := readResults(br, qs)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

func readResults(br pgx.BatchResults, qs []query) error {
	for _, q := range qs {
		if q.scan == nil {
			if _, err := br.Exec(); err != nil {
				return err
			}
			continue
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		err = q.scan(rows)
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// exchangeAlone sends qs, a whole transaction from BEGIN to COMMIT, as
// one round trip on a pooled connection; qs' scans must not fail, as the
// server has run COMMIT by the time they read. When a statement fails the
// server skips the rest, COMMIT included: the transaction is rolled back
// before the connection returns to the pool. A connection lost once the
// statements were sent is ErrCommitUnknown: COMMIT may have run.
func (s *Store) exchangeAlone(ctx context.Context, qs []query) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	t := &txn{s: s, ctx: ctx, conn: pc.Conn(), begun: true}
	err = t.exchange(qs)
	t.ended = err == nil
	if err != nil && t.conn.PgConn().IsClosed() && !pgconn.SafeToRetry(err) {
		err = fmt.Errorf("%w: %w", ErrCommitUnknown, err)
	}
	t.release(pc)
	return err
}

// fail records a database failure: the transaction is aborted. It may run
// again after a serialization failure, a deadlock, or a connection lost
// before its commit was sent.
func (t *txn) fail(op string, err error) error {
	t.retry = retryable(err) || t.conn.PgConn().IsClosed()
	t.err = fmt.Errorf("store/postgres: %s: %w", op, err)
	return t.err
}

// retryable: the server aborted the transaction for a conflict with
// another one; running it again can succeed.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01" // serialization_failure, deadlock_detected
	}
	return false
}

// commit sends the queued writes, the sequence, the notification and
// COMMIT in one round trip.
func (t *txn) commit() error {
	qs := []query{}
	if t.seqMoved {
		qs = append(qs, query{sql: saveSeq, args: []any{t.seq}})
	}
	payload := t.s.id + " " + strconv.FormatUint(t.seq, 10)
	qs = append(qs, query{sql: notify, args: []any{t.s.channel, payload}, scan: func(pgx.Rows) error { return nil }},
		query{sql: "COMMIT"})
	all := t.prologue(qs)
	err := t.exchange(all)
	t.ended = true
	if err == nil {
		if t.seqMoved {
			t.s.ownSeq.Store(t.seq)
		}
		return nil
	}
	t.err = fmt.Errorf("store/postgres: commit: %w", err)
	switch {
	case retryable(err):
		t.retry = true
	case t.conn.PgConn().IsClosed():
		if pgconn.SafeToRetry(err) {
			t.retry = true
		} else {
			t.err = fmt.Errorf("%w: %w", ErrCommitUnknown, err)
		}
	default:
		t.ended = false // rolled back by release
	}
	return t.err
}

// release ends the transaction if it is still open and returns the
// connection to the pool (a connection that cannot roll back is closed).
func (t *txn) release(pc *pgxpool.Conn) {
	if t.begun && !t.ended && !t.conn.PgConn().IsClosed() {
		if _, err := t.conn.Exec(t.ctx, "ROLLBACK"); err != nil {
			_ = t.conn.Close(t.ctx)
		}
	}
	pc.Release()
}

func (t *txn) writable() error {
	if !t.write {
		return store.ErrReadOnly
	}
	return t.err
}

// queue adds a write to the next round trip.
func (t *txn) queue(sql string, args ...any) {
	t.dirty = true
	t.pending = append(t.pending, query{sql: sql, args: args})
}
