package store

import "context"

// Evidence is the port of a Store that keeps runs' raw agent evidence:
// the exact prompt each agent process received and the bytes it wrote, in
// the order they were recorded. Evidence belongs to a run: it is
// written only while the run record exists, read under the run's tenant
// only, and Pruner.DeleteRun deletes it with the run. Writing it wakes no
// watcher (it is not part of the run's event log).
type Evidence interface {
	// AppendEvidence appends recs to a run's evidence in one transaction,
	// assigning each an ID greater than every earlier one of the run. An
	// unknown run is ErrNoRun and nothing is written.
	AppendEvidence(ctx context.Context, tenant, runID string, recs []EvidenceRecord) error
	// EvidenceAfter returns up to limit records of a run with afterID <
	// ID <= throughID, in ID order.
	EvidenceAfter(ctx context.Context, tenant, runID string, afterID, throughID uint64, limit int) ([]EvidenceRecord, error)
	// LastEvidence is the highest ID of a run's evidence (0: none).
	LastEvidence(ctx context.Context, tenant, runID string) (uint64, error)
}

// EvidenceRecord is one record of a run's evidence, of one process: the
// Turn-th process (from 0) of an execution. Kind and Attr are short
// strings the writer defines (what the record is, and a detail of it);
// Data is any bytes.
type EvidenceRecord struct {
	ID        uint64
	Execution string
	Turn      int
	Kind      string
	Attr      string
	Data      []byte
}
