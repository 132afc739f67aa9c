package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oecp/oecp/store"
)

// store.Evidence. An append is a transaction of its own that locks the
// run's row (FOR KEY SHARE) so that a retention deleting the run waits
// for it and then deletes its records too; it notifies no watcher.

var _ store.Evidence = (*Store)(nil)

// AppendEvidence implements store.Evidence.
func (s *Store) AppendEvidence(ctx context.Context, tenant, runID string, recs []store.EvidenceRecord) error {
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Exit()
	actx, cancel := context.WithTimeout(ctx, s.txTimeout)
	defer cancel()
	err := pgx.BeginFunc(actx, s.pool, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(actx, `SELECT 1 FROM runs WHERE tenant = $1 AND id = $2 FOR KEY SHARE`, []byte(tenant), []byte(runID)).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %q", store.ErrNoRun, runID)
		}
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, r := range recs {
			data := r.Data
			if data == nil {
				data = []byte{}
			}
			b.Queue(`INSERT INTO evidence (tenant, run_id, execution, turn, kind, attr, data) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				[]byte(tenant), []byte(runID), []byte(r.Execution), int64(r.Turn), []byte(r.Kind), []byte(r.Attr), data)
		}
		return tx.SendBatch(actx, b).Close()
	})
	if err != nil {
		return classify(ctx, fmt.Errorf("store/postgres: append evidence: %w", err))
	}
	return nil
}

// EvidenceAfter implements store.Evidence.
func (s *Store) EvidenceAfter(ctx context.Context, tenant, runID string, afterID, throughID uint64, limit int) ([]store.EvidenceRecord, error) {
	if err := s.gate.Enter(); err != nil {
		return nil, err
	}
	defer s.gate.Exit()
	rows, err := s.pool.Query(ctx, `SELECT id, execution, turn, kind, attr, data FROM evidence
		WHERE tenant = $1 AND run_id = $2 AND id > $3 AND id <= $4 ORDER BY id LIMIT $5`,
		[]byte(tenant), []byte(runID), int64(afterID), int64(throughID), limit)
	if err != nil {
		return nil, classify(ctx, fmt.Errorf("store/postgres: read evidence: %w", err))
	}
	defer rows.Close()
	var out []store.EvidenceRecord
	for rows.Next() {
		var id, turn int64
		var exec, kind, attr, data []byte
		if err := rows.Scan(&id, &exec, &turn, &kind, &attr, &data); err != nil {
			return nil, classify(ctx, fmt.Errorf("store/postgres: read evidence: %w", err))
		}
		out = append(out, store.EvidenceRecord{ID: uint64(id), Execution: string(exec), Turn: int(turn), Kind: string(kind), Attr: string(attr), Data: data})
	}
	if err := rows.Err(); err != nil {
		return nil, classify(ctx, fmt.Errorf("store/postgres: read evidence: %w", err))
	}
	return out, nil
}

// LastEvidence implements store.Evidence.
func (s *Store) LastEvidence(ctx context.Context, tenant, runID string) (uint64, error) {
	if err := s.gate.Enter(); err != nil {
		return 0, err
	}
	defer s.gate.Exit()
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM evidence WHERE tenant = $1 AND run_id = $2`, []byte(tenant), []byte(runID)).Scan(&id)
	if err != nil {
		return 0, classify(ctx, fmt.Errorf("store/postgres: read evidence: %w", err))
	}
	return uint64(id), nil
}
