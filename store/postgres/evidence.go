package postgres

import (
	"context"
	"fmt"

	"github.com/oecp/oecp/store"
)

// store.Evidence. An append is a transaction of its own that locks the
// run's row (FOR KEY SHARE) so that a retention deleting the run waits
// for it and then deletes its records too; it notifies no watcher. Its
// statements go out together, in one round trip once the connection has
// them prepared: the lock, the inserts (each only while the run's row
// exists) and COMMIT. The transaction reads one snapshot (REPEATABLE
// READ), so the inserts see the run exactly as the lock did, and the
// lock's answer says whether the run was there and anything was written.
//
// Its commit does not wait for the write-ahead log to reach the disk
// (synchronous_commit off). An execution's outcome is recorded after its
// evidence is saved (or the wait for it gave up), and that record's
// commit, which waits, flushes the log up to itself and so every saved
// append before it. What a crash of the database can lose is the
// evidence of the last moments before it: of executions whose outcome
// was not recorded yet, or whose evidence the outcome did not wait for.

var _ store.Evidence = (*Store)(nil)

const (
	qLockRun        = `SELECT 1 FROM runs WHERE tenant = $1 AND id = $2 FOR KEY SHARE`
	qInsertEvidence = `INSERT INTO evidence (tenant, run_id, execution, turn, kind, attr, data)
		SELECT $1::bytea, $2::bytea, $3::bytea, $4::bigint, $5::bytea, $6::bytea, $7::bytea
		WHERE EXISTS (SELECT 1 FROM runs WHERE tenant = $1 AND id = $2)`
)

// AppendEvidence implements store.Evidence.
func (s *Store) AppendEvidence(ctx context.Context, tenant, runID string, recs []store.EvidenceRecord) error {
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Exit()
	actx, cancel := context.WithTimeout(ctx, s.txTimeout)
	defer cancel()
	found := false
	qs := []query{{sql: beginSnapshot}, {sql: asyncCommit}, row(&found, qLockRun, []any{tenant, runID}, new(int))}
	for _, r := range recs {
		data := r.Data
		if data == nil {
			data = []byte{}
		}
		qs = append(qs, query{sql: qInsertEvidence, args: []any{tenant, runID, r.Execution, int64(r.Turn), r.Kind, r.Attr, data}})
	}
	qs = append(qs, query{sql: "COMMIT"})
	err := s.exchangeAlone(actx, qs)
	if err == nil && !found {
		err = fmt.Errorf("%w: %q", store.ErrNoRun, runID)
	}
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
