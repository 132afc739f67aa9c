package store

import (
	"context"
	"fmt"
	"slices"
)

var _ Evidence = (*memory)(nil)

// AppendEvidence implements Evidence: the records are kept on the run's
// entry, so deleting the run deletes them.
func (m *memory) AppendEvidence(ctx context.Context, tenant, runID string, recs []EvidenceRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	e, ok := m.runs[tkey{tenant, runID}]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoRun, runID)
	}
	for _, r := range recs {
		m.evidenceID++
		r.ID = m.evidenceID
		r.Data = slices.Clone(r.Data)
		e.evidence = append(e.evidence, r)
	}
	return nil
}

// EvidenceAfter implements Evidence.
func (m *memory) EvidenceAfter(ctx context.Context, tenant, runID string, afterID, throughID uint64, limit int) ([]EvidenceRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	e, ok := m.runs[tkey{tenant, runID}]
	if !ok {
		return nil, nil
	}
	var out []EvidenceRecord
	for _, r := range e.evidence {
		if len(out) >= limit || r.ID > throughID {
			break
		}
		if r.ID > afterID {
			out = append(out, r)
		}
	}
	return out, nil
}

// LastEvidence implements Evidence.
func (m *memory) LastEvidence(ctx context.Context, tenant, runID string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0, ErrClosed
	}
	e, ok := m.runs[tkey{tenant, runID}]
	if !ok || len(e.evidence) == 0 {
		return 0, nil
	}
	return e.evidence[len(e.evidence)-1].ID, nil
}
