// Package evidence records the raw evidence of a native run's agent
// processes: for every process, the exact prompt it was given and the raw
// bytes it wrote, kept with the run's records in the store's evidence, so that the run can be exported (the records' kinds and
// their reading are package runs/export's). The processes report through
// a worker.Tap; the tap only appends to memory and a flusher writes
// batches to the store, so an agent never waits on the store. What is
// queued is bounded, all runs together: past the bounds a record is
// dropped, counted and logged. Every declared value, in each of the
// spellings it is given (redact.Spellings), is redacted from the prompts
// and the streams wherever the reads of a stream cut it.
//
// It touches the store only through store.Evidence, and knows nothing of
// a run's records, leases or state: package runs gives it each execution's
// tap and waits on it before it records an outcome or exports a run.
package evidence
