package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/oecp/oecp/store"
)

// Statement ids. Every statement is prepared once at Open on the writer
// connection; the read-only ones also on the read pool.
const (
	stBegin = iota
	stCommit
	stRollback
	stCluster
	stInsertCluster
	stUpdateCluster
	stIdem
	stInsertIdem
	stRun
	stFirstRunAfter
	stEvent
	stEvents
	stLastSeq
	stRaiseSeq
	stInsertRun
	stInsertEvent
	stUpdateRun
	stTombstoneRun
	stDeleteEvents
	stNextCounter
	stLease
	stPutLease
	stIndexEntry
	stIndexBelow
	stSetIndexEntry
	stDeleteIndexEntry
	stRunState
	stInsertRunState
	stUpdateRunState
	stDeleteRunState
	nStmts
)

var stmtSQL = [nStmts]string{
	stBegin:         `BEGIN IMMEDIATE`,
	stCommit:        `COMMIT`,
	stRollback:      `ROLLBACK`,
	stCluster:       `SELECT version, data FROM clusters WHERE tenant = ?`,
	stInsertCluster: `INSERT INTO clusters (tenant, version, data) VALUES (?, 1, ?) ON CONFLICT DO NOTHING`,
	stUpdateCluster: `UPDATE clusters SET version = ?, data = ? WHERE tenant = ? AND version = ?`,
	stIdem:          `SELECT fingerprint, result FROM idempotency WHERE tenant = ? AND key = ?`,
	stInsertIdem:    `INSERT INTO idempotency (tenant, key, fingerprint, result) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
	stRun:           `SELECT seed, first_seq, last_seq, count, tombstoned FROM runs WHERE tenant = ? AND id = ?`,
	stFirstRunAfter: `SELECT id, seed, first_seq, last_seq, count, tombstoned FROM runs
		WHERE tenant = ? AND count > 0 AND first_seq > ? ORDER BY first_seq LIMIT 1`,
	stEvent:        `SELECT run_id, idx, body FROM events WHERE seq = ? AND tenant = ?`,
	stEvents:       `SELECT seq, idx, body FROM events WHERE tenant = ? AND run_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
	stLastSeq:      `SELECT max(last, coalesce((SELECT max(seq) FROM events), 0)) FROM sequence WHERE id = 1`,
	stRaiseSeq:     `UPDATE sequence SET last = max(last, ?) WHERE id = 1`,
	stInsertRun:    `INSERT INTO runs (tenant, id, seed) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
	stInsertEvent:  `INSERT INTO events (seq, tenant, run_id, idx, body) VALUES (?, ?, ?, ?, ?)`,
	stUpdateRun:    `UPDATE runs SET first_seq = ?, last_seq = ?, count = ? WHERE tenant = ? AND id = ?`,
	stTombstoneRun: `UPDATE runs SET tombstoned = 1 WHERE tenant = ? AND id = ?`,
	stDeleteEvents: `DELETE FROM events WHERE tenant = ? AND run_id = ?`,
	stNextCounter: `INSERT INTO counters (name, value) VALUES (?, 1)
		ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value`,
	stLease: `SELECT owner, epoch FROM leases WHERE name = ?`,
	stPutLease: `INSERT INTO leases (name, owner, epoch) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch`,
	stIndexEntry: `SELECT n FROM indexes WHERE key = ? AND entry = ?`,
	stIndexBelow: `SELECT entry, n FROM indexes WHERE key = ? AND n <= ? ORDER BY n, entry LIMIT ?`,
	stSetIndexEntry: `INSERT INTO indexes (key, entry, n) VALUES (?, ?, ?)
		ON CONFLICT (key, entry) DO UPDATE SET n = excluded.n`,
	stDeleteIndexEntry: `DELETE FROM indexes WHERE key = ? AND entry = ?`,
	stRunState:         `SELECT version, data FROM run_states WHERE tenant = ? AND run_id = ?`,
	stInsertRunState:   `INSERT INTO run_states (tenant, run_id, version, data) VALUES (?, ?, 1, ?) ON CONFLICT DO NOTHING`,
	stUpdateRunState:   `UPDATE run_states SET version = ?, data = ? WHERE tenant = ? AND run_id = ? AND version = ?`,
	stDeleteRunState:   `DELETE FROM run_states WHERE tenant = ? AND run_id = ?`,
}

var readOnlyStmt = [nStmts]bool{
	stCluster: true, stIdem: true, stRun: true, stFirstRunAfter: true,
	stEvent: true, stEvents: true, stLastSeq: true, stLease: true,
	stIndexEntry: true, stIndexBelow: true, stRunState: true,
}

// txn is a transaction: a write transaction on the writer connection (rtx
// nil) or a read transaction on the pool.
type txn struct {
	s   *Store
	rtx *sql.Tx
	// stmts caches the read statements bound to rtx.
	stmts [nStmts]*sql.Stmt

	// Write transactions only.
	dirty bool
	seq   uint64                // last sequence assigned (starts at the committed one)
	runs  map[runKey]*store.Run // runs read or written in this transaction
	// leased: lease rows were written (committed, but not watched data).
	leased bool
	// takeovers are the leases taken over from another owner.
	takeovers []takeover
}

type runKey struct{ tenant, id string }

var bg = context.Background()

func (t *txn) st(id int) *sql.Stmt {
	if t.rtx == nil {
		return t.s.wstmts[id]
	}
	if t.stmts[id] == nil {
		t.stmts[id] = t.rtx.Stmt(t.s.rstmts[id])
	}
	return t.stmts[id]
}

func (t *txn) writable() error {
	if t.rtx != nil {
		return store.ErrReadOnly
	}
	return nil
}

func (t *txn) exec(id int, args ...any) (sql.Result, error) {
	t.dirty = true
	return t.s.wstmts[id].ExecContext(bg, args...)
}

func dbErr(op string, err error) error { return classify(fmt.Errorf("store/sqlite: %s: %w", op, err)) }

// lookup runs the one-row query of statement id with args and scans the
// row into dest; found is false (and err nil) when there is no row, and a
// failure is reported as op.
func (t *txn) lookup(op string, id int, args []any, dest ...any) (found bool, err error) {
	err = t.st(id).QueryRowContext(bg, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, dbErr(op, err)
	}
	return true, nil
}

func (t *txn) Cluster(tenant string) (store.Cluster, bool, error) {
	var c store.Cluster
	var v int64
	if ok, err := t.lookup("read cluster", stCluster, []any{tenant}, &v, &c.Data); !ok {
		return store.Cluster{}, false, err
	}
	c.Version = uint64(v)
	return c, true, nil
}

func (t *txn) Idempotency(tenant, key string) (store.Receipt, bool, error) {
	var r store.Receipt
	if ok, err := t.lookup("read receipt", stIdem, []any{tenant, key}, &r.Fingerprint, &r.Result); !ok {
		return store.Receipt{}, false, err
	}
	return r, true, nil
}

// run returns the current run record, through the transaction's cache.
func (t *txn) run(tenant, id string) (*store.Run, error) {
	k := runKey{tenant, id}
	if r, ok := t.runs[k]; ok {
		return r, nil
	}
	r := &store.Run{ID: id}
	var first, last, count int64
	if ok, err := t.lookup("read run", stRun, []any{tenant, id}, &r.Seed, &first, &last, &count, &r.Tombstoned); !ok {
		return nil, err
	}
	r.FirstSeq, r.LastSeq, r.Count = uint64(first), uint64(last), uint64(count)
	if t.rtx == nil {
		if t.runs == nil {
			t.runs = map[runKey]*store.Run{}
		}
		t.runs[k] = r
	}
	return r, nil
}

func (t *txn) Run(tenant, runID string) (store.Run, bool, error) {
	r, err := t.run(tenant, runID)
	if err != nil || r == nil {
		return store.Run{}, false, err
	}
	return *r, true, nil
}

func (t *txn) FirstRunAfter(tenant string, seq uint64) (store.Run, bool, error) {
	var r store.Run
	var first, last, count int64
	if ok, err := t.lookup("find run", stFirstRunAfter, []any{tenant, int64(seq)}, &r.ID, &r.Seed, &first, &last, &count, &r.Tombstoned); !ok {
		return store.Run{}, false, err
	}
	r.FirstSeq, r.LastSeq, r.Count = uint64(first), uint64(last), uint64(count)
	return r, true, nil
}

func (t *txn) Event(tenant string, seq uint64) (store.Event, bool, error) {
	ev := store.Event{Seq: seq}
	var idx int64
	if ok, err := t.lookup("read event", stEvent, []any{int64(seq), tenant}, &ev.RunID, &idx, &ev.Body); !ok {
		return store.Event{}, false, err
	}
	ev.Index = uint64(idx)
	return ev, true, nil
}

func (t *txn) Events(tenant, runID string, afterSeq uint64, limit int) (out []store.Event, err error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := t.st(stEvents).QueryContext(bg, tenant, runID, int64(afterSeq), limit)
	if err != nil {
		return nil, dbErr("read events", err)
	}
	defer rows.Close()
	for rows.Next() {
		ev := store.Event{RunID: runID}
		var seq, idx int64
		if err := rows.Scan(&seq, &idx, &ev.Body); err != nil {
			return nil, dbErr("read events", err)
		}
		ev.Seq, ev.Index = uint64(seq), uint64(idx)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("read events", err)
	}
	return out, nil
}

func (t *txn) LastSeq() (uint64, error) {
	if t.rtx == nil {
		return t.seq, nil
	}
	var last int64
	if err := t.st(stLastSeq).QueryRowContext(bg).Scan(&last); err != nil {
		return 0, dbErr("read sequence", err)
	}
	return uint64(last), nil
}

func (t *txn) PutCluster(tenant string, c store.Cluster) error {
	if err := t.writable(); err != nil {
		return err
	}
	var res sql.Result
	var err error
	if c.Version == 1 {
		res, err = t.exec(stInsertCluster, tenant, c.Data)
	} else {
		res, err = t.exec(stUpdateCluster, int64(c.Version), c.Data, tenant, int64(c.Version-1))
	}
	if err != nil {
		return dbErr("write cluster", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		cur, _, rerr := t.Cluster(tenant)
		return errors.Join(fmt.Errorf("%w: tenant %q has version %d, put %d", store.ErrVersionConflict, tenant, cur.Version, c.Version), err, rerr)
	}
	return nil
}

func (t *txn) PutIdempotency(tenant, key string, r store.Receipt) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.exec(stInsertIdem, tenant, key, r.Fingerprint, r.Result)
	if err != nil {
		return dbErr("write receipt", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return errors.Join(fmt.Errorf("%w: idempotency key %q", store.ErrExists, key), err)
	}
	return nil
}

func (t *txn) CreateRun(tenant string, r store.Run) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.exec(stInsertRun, tenant, r.ID, r.Seed)
	if err != nil {
		return dbErr("create run", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return errors.Join(fmt.Errorf("%w: run %q", store.ErrExists, r.ID), err)
	}
	if t.runs == nil {
		t.runs = map[runKey]*store.Run{}
	}
	t.runs[runKey{tenant, r.ID}] = &store.Run{ID: r.ID, Seed: append([]byte(nil), r.Seed...)}
	return nil
}

func (t *txn) AppendEvent(tenant, runID string, encode func(seq uint64) ([]byte, error)) (store.Event, error) {
	if err := t.writable(); err != nil {
		return store.Event{}, err
	}
	r, err := t.run(tenant, runID)
	if err != nil {
		return store.Event{}, err
	}
	cur := store.Run{ID: runID}
	if r != nil {
		cur = *r
	}
	seq := t.seq + 1
	ev, err := store.NewEvent(cur, r != nil, seq, encode)
	if err != nil {
		return store.Event{}, err
	}
	if _, err := t.exec(stInsertEvent, int64(seq), tenant, runID, int64(ev.Index), ev.Body); err != nil {
		return store.Event{}, dbErr("append event", err)
	}
	first := r.FirstSeq
	if r.Count == 0 {
		first = seq
	}
	if _, err := t.exec(stUpdateRun, int64(first), int64(seq), int64(ev.Index), tenant, runID); err != nil {
		return store.Event{}, dbErr("append event", err)
	}
	// The statements succeeded: only now move the cached record and the
	// sequence, so that a failed append leaves them consistent.
	r.FirstSeq, r.LastSeq, r.Count = first, seq, ev.Index
	t.seq = seq
	return ev, nil
}

func (t *txn) TombstoneRun(tenant, runID string) error {
	if err := t.writable(); err != nil {
		return err
	}
	res, err := t.exec(stTombstoneRun, tenant, runID)
	if err != nil {
		return dbErr("tombstone run", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return errors.Join(fmt.Errorf("%w: %q", store.ErrNoRun, runID), err)
	}
	if _, err := t.exec(stDeleteEvents, tenant, runID); err != nil {
		return dbErr("tombstone run", err)
	}
	// The deleted events may have held the highest sequence: keep it.
	if _, err := t.exec(stRaiseSeq, int64(t.seq)); err != nil {
		return dbErr("tombstone run", err)
	}
	if r, ok := t.runs[runKey{tenant, runID}]; ok {
		r.Tombstoned = true
	}
	return nil
}

func (t *txn) NextCounter(name string) (uint64, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	t.dirty = true
	var v int64
	if err := t.s.wstmts[stNextCounter].QueryRowContext(bg, name).Scan(&v); err != nil {
		return 0, dbErr("next counter", err)
	}
	return uint64(v), nil
}

func (t *txn) Lease(name string) (store.Lease, bool, error) {
	l := store.Lease{Name: name}
	var epoch int64
	if ok, err := t.lookup("read lease", stLease, []any{name}, &l.Owner, &epoch); !ok {
		return store.Lease{}, false, err
	}
	l.Epoch = uint64(epoch)
	return l, true, nil
}

var (
	_ store.Tx          = (*txn)(nil)
	_ store.LeaseReader = (*txn)(nil)
)
