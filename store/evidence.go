package store

import "context"

// Evidence is the optional port of a Store that keeps runs' raw agent
// evidence: the exact prompt each agent process received and the bytes it
// wrote, in the order they were recorded. Evidence belongs to a run: it is
// written only while the run record exists, read under the run's tenant
// only, and Pruner.DeleteRun deletes it with the run. Writing it wakes no
// watcher (it is not part of the run's event log). The memory, SQLite and
// PostgreSQL stores implement it.
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

// Kinds of evidence records.
const (
	// EvidencePrompt is what a process was given: Data is its standard
	// input, or its last argument when its standard input was empty (Attr
	// says which: "stdin" or "argv").
	EvidencePrompt = "prompt"
	// EvidenceStdout and EvidenceStderr are bytes a process wrote.
	EvidenceStdout = "stdout"
	EvidenceStderr = "stderr"
	// EvidenceTruncated says a stream (Attr) of the process went past the
	// bound of what is kept; the rest of it is not recorded.
	EvidenceTruncated = "truncated"
	// EvidenceEnd closes a process's evidence: everything it wrote up to
	// the bound was recorded.
	EvidenceEnd = "end"
)

// EvidenceRecord is one record of a run's evidence, of one process: the
// Turn-th process (from 0) of an execution.
type EvidenceRecord struct {
	ID        uint64
	Execution string
	Turn      int
	Kind      string
	Attr      string
	Data      []byte
}
