package sqlite

import (
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
	if err != nil {
		return nil, dbErr("read index", err)
	}
	defer rows.Close()
	var out []store.Indexed
	for rows.Next() {
		var e store.Indexed
		var n int64
		if err := rows.Scan(&e.Entry, &n); err != nil {
			return nil, dbErr("read index", err)
		}
		e.N = uint64(n)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("read index", err)
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
