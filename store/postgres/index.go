package postgres

import (
	"errors"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/oecp/oecp/store"
)

// The store's indexes: the indexes table, one row per entry. A write
// transaction caches the entries it read or wrote (see txn); whole reads
// go to the server after the queued writes.

const (
	qIndexEntry = `SELECT n FROM indexes WHERE key = $1 AND entry = $2`
	qIndexBelow = `SELECT entry, n FROM indexes WHERE key = $1 AND n <= $2 ORDER BY n, entry LIMIT $3`
	qSetIndex   = `INSERT INTO indexes (key, entry, n) VALUES ($1, $2, $3)
		ON CONFLICT (key, entry) DO UPDATE SET n = EXCLUDED.n`
	qDeleteIndex = `DELETE FROM indexes WHERE key = $1 AND entry = $2`
)

func (t *txn) IndexEntry(key, entry string) (uint64, bool, error) {
	k := [2]string{key, entry}
	if n, ok := t.indexes[k]; ok {
		if n == nil {
			return 0, false, nil
		}
		return *n, true, nil
	}
	var n uint64
	var found bool
	if err := t.send("read index", row(&found, qIndexEntry, []any{key, entry}, &n)); err != nil {
		return 0, false, err
	}
	if t.write {
		t.indexes = put(t.indexes, k, &n, found)
	}
	return n, found, nil
}

func (t *txn) IndexEntries(key string) ([]store.Indexed, error) {
	return t.IndexBelow(key, math.MaxUint64, math.MaxInt64)
}

func (t *txn) IndexBelow(key string, below uint64, limit int) ([]store.Indexed, error) {
	if limit <= 0 || below == 0 {
		return nil, nil
	}
	var out []store.Indexed
	scan := func(rows pgx.Rows) error {
		for rows.Next() {
			var e store.Indexed
			if err := rows.Scan(str{&e.Entry}, &e.N); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	}
	args := []any{key, int64(min(below-1, store.MaxIndexNumber)), int64(limit)}
	if err := t.send("read index", query{sql: qIndexBelow, args: args, scan: scan}); err != nil {
		return nil, err
	}
	return out, nil
}

func (t *txn) SetIndexEntry(key, entry string, n uint64) error {
	if err := errors.Join(t.writable(), store.CheckIndexNumber(key, entry, n)); err != nil {
		return err
	}
	if n == 0 {
		t.queue(qDeleteIndex, key, entry)
	} else {
		t.queue(qSetIndex, key, entry, int64(n))
	}
	t.indexes = put(t.indexes, [2]string{key, entry}, &n, n != 0)
	return nil
}
