package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/oecp/oecp/store"
)

// store.Evidence. Appends run as write transactions of their own that
// wake no watcher; reads run on the read pool, from the read goroutines.
// Neither is prepared: they come in batches, not per event.

var _ store.Evidence = (*Store)(nil)

// AppendEvidence implements store.Evidence.
func (s *Store) AppendEvidence(ctx context.Context, tenant, runID string, recs []store.EvidenceRecord) error {
	return s.write(ctx, func(t *txn) error {
		r, err := t.run(tenant, runID)
		if err != nil {
			return err
		}
		if r == nil {
			return fmt.Errorf("%w: %q", store.ErrNoRun, runID)
		}
		for _, rec := range recs {
			t.dirty = true
			_, err := t.s.wconn.ExecContext(bg, `INSERT INTO evidence (tenant, run_id, execution, turn, kind, attr, data) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				tenant, runID, rec.Execution, rec.Turn, rec.Kind, rec.Attr, nonNil(rec.Data))
			if err != nil {
				return dbErr("append evidence", err)
			}
		}
		return nil
	})
}

// nonNil keeps an empty record's data a BLOB, not NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// EvidenceAfter implements store.Evidence.
func (s *Store) EvidenceAfter(ctx context.Context, tenant, runID string, afterID, throughID uint64, limit int) (out []store.EvidenceRecord, err error) {
	if err := s.gate.Enter(); err != nil {
		return nil, err
	}
	defer s.gate.Exit()
	if werr := s.readers.run(ctx, func() {
		rows, qerr := s.rdb.QueryContext(ctx, `SELECT id, execution, turn, kind, attr, data FROM evidence
			WHERE tenant = ? AND run_id = ? AND id > ? AND id <= ? ORDER BY id LIMIT ?`, tenant, runID, int64(afterID), int64(throughID), limit)
		out, err = scanRows(rows, qerr, "read evidence", func(rows *sql.Rows) (r store.EvidenceRecord, err error) {
			var id int64
			err = rows.Scan(&id, &r.Execution, &r.Turn, &r.Kind, &r.Attr, &r.Data)
			r.ID = uint64(id)
			return r, err
		})
	}); werr != nil {
		return nil, werr
	}
	return out, err
}

// LastEvidence implements store.Evidence.
func (s *Store) LastEvidence(ctx context.Context, tenant, runID string) (uint64, error) {
	if err := s.gate.Enter(); err != nil {
		return 0, err
	}
	defer s.gate.Exit()
	var id int64
	var err error
	if werr := s.readers.run(ctx, func() {
		err = s.rdb.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM evidence WHERE tenant = ? AND run_id = ?`, tenant, runID).Scan(&id)
	}); werr != nil {
		return 0, werr
	}
	if err != nil {
		return 0, dbErr("read evidence", err)
	}
	return uint64(id), nil
}
