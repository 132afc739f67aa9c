package runs

import "github.com/oecp/oecp/engine/worker"

// withEvidence runs an agent execution with the tap of its evidence
// (package runs/evidence), then waits a bounded time for the evidence to
// be written. values are the spellings
// of the declared variables' values (recordRedactor.byteValues), redacted
// from what it records.
func (b *Backend) withEvidence(tk, runID, execution string, values [][]byte, run func(worker.Tap) worker.Outcome) worker.Outcome {
	return b.evidence.Run(tk, runID, execution, values, run)
}
