package sqlite

import (
	"database/sql"
	"errors"
	"math"

	"github.com/oecp/oecp/store"
)

// The store's indexes: the indexes table, one row per entry; a number is
// at most store.MaxIndexNumber, so it fits the INTEGER column.

func (t *txn) IndexEntry(key, entry string) (uint64, bool, error) {
	var n int64
	ok, err := t.lookup("read index", stIndexEntry, []any{key, entry}, &n)
	return uint64(n), ok, err
}

func (t *txn) IndexEntries(key string) ([]store.Indexed, error) {
	return t.IndexBelow(key, math.MaxUint64, math.MaxInt64)
}

func (t *txn) IndexBelow(key string, below uint64, limit int) ([]store.Indexed, error) {
	if limit <= 0 || below == 0 {
		return nil, nil
	}
	rows, err := t.st(stIndexBelow).QueryContext(bg, key, int64(min(below-1, store.MaxIndexNumber)), limit)
	return scanRows(rows, err, "read index", func(rows *sql.Rows) (e store.Indexed, err error) {
		var n int64
		err = rows.Scan(&e.Entry, &n)
		e.N = uint64(n)
		return e, err
	})
}

// scanRows reads every row of the result of a query (err: its failure)
// with scan; a failure is reported as op.
func scanRows[T any](rows *sql.Rows, err error, op string, scan func(*sql.Rows) (T, error)) ([]T, error) {
	if err != nil {
		return nil, dbErr(op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, dbErr(op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr(op, err)
	}
	return out, nil
}

func (t *txn) SetIndexEntry(key, entry string, n uint64) error {
	if err := errors.Join(t.writable(), store.CheckIndexNumber(key, entry, n)); err != nil {
		return err
	}
	var err error
	if n == 0 {
		_, err = t.exec(stDeleteIndexEntry, key, entry)
	} else {
		_, err = t.exec(stSetIndexEntry, key, entry, int64(n))
	}
	if err != nil {
		return dbErr("write index", err)
	}
	return nil
}
