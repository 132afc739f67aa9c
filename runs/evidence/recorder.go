package evidence

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/lograte"
	"github.com/oecp/oecp/runs/export"
	"github.com/oecp/oecp/store"
)

// Before an execution's outcome is recorded, its evidence is given a
// bounded time to reach the store, so that a finished run's export is
// complete.

// Bounds of the evidence kept.
const (
	// maxStream bounds what is kept of one stream (stdout or stderr) of
	// one process: the drivers' per-process stdout cap. The rest is not
	// kept and the export's footer says so.
	maxStream = 8 << 20
	// chunk bounds one stored output record; the flusher merges
	// consecutive pieces of a stream up to it.
	chunk = 64 << 10
	// batchBytes bounds the bytes one store write carries.
	batchBytes = 1 << 20
	// saveWait bounds how long an ended execution (or an export) waits
	// for its evidence to be written before it goes on anyway.
	saveWait = 30 * time.Second
	// linger is how long the flusher lets pieces gather before a write
	// that is neither full (batchBytes) nor awaited by an ended
	// execution, so that a chatty process costs a few transactions a
	// second, not one per read.
	linger = 250 * time.Millisecond
	// maxPending and maxPendingRecords bound the evidence queued for the
	// store or being written, all runs together. Past either a record is
	// dropped, counted and logged rather than made to wait: an agent never
	// waits on the store, and the export reports the gap or the lost end.
	maxPending        = 64 << 20
	maxPendingRecords = 1 << 16
)

// Kinds of evidence records: a prompt (Attr "stdin" or "argv"), output
// (Attr: the offset of its first byte in the stream, decimal), and a
// process's end (Data: an export.End).
const (
	evPrompt = export.KindPrompt
	evStdout = export.KindStdout
	evStderr = export.KindStderr
	evEnd    = export.KindEnd
)

// runKey names a run: its store tenant key and its id.
type runKey struct{ tk, runID string }

type execKey struct {
	run       runKey
	execution string
}

type pendingEvidence struct {
	key execKey
	rec store.EvidenceRecord
}

// Recorder queues evidence and writes it in batches, one flusher at a
// time while anything is pending. Once closed it takes no record: a
// flusher is only started under mu while it is open, so Close's Wait
// never races an Add, and a record that comes after is counted as
// dropped, never left pending with nobody to write it. It is safe for
// concurrent use.
type Recorder struct {
	st  store.Evidence
	log *slog.Logger

	mu       sync.Mutex
	changed  *sync.Cond // signalled when an execution's count drops
	pending  []pendingEvidence
	size     int             // bytes pending
	held     int             // bytes pending or being written
	records  int             // records pending or being written
	unsaved  map[execKey]int // queued or being written, per execution
	runs     map[runKey]int  // the same, per run
	flushing bool
	kick     chan struct{} // ends the flusher's linger (capacity 1)
	wg       sync.WaitGroup
	closed   bool
	dropped  int64 // records refused: past the bounds or after close

	// dropLog bounds the repeats of the line saying records were dropped.
	dropLog lograte.Limiter
}

// NewRecorder returns the recorder of st's evidence. log receives the
// lines about dropped evidence.
func NewRecorder(st store.Evidence, log *slog.Logger) *Recorder {
	r := &Recorder{st: st, log: log, unsaved: map[execKey]int{}, runs: map[runKey]int{}, kick: make(chan struct{}, 1)}
	r.changed = sync.NewCond(&r.mu)
	return r
}

// Tap returns the worker.Tap of one execution of a run (tenant: the
// run's store tenant key). values are the spellings of the declared
// variables' values, redacted from what it records.
func (r *Recorder) Tap(tenant, runID, execution string, values [][]byte) worker.Tap {
	return &execTap{r: r, key: execKey{runKey{tenant, runID}, execution}, red: newRedactor(values)}
}

// Run runs an agent execution with the tap of its evidence, then waits
// (a bounded time) for the evidence to be written, and returns the
// execution's outcome.
func (r *Recorder) Run(tenant, runID, execution string, values [][]byte, run func(worker.Tap) worker.Outcome) worker.Outcome {
	out := run(r.Tap(tenant, runID, execution, values))
	r.waitSaved(execKey{runKey{tenant, runID}, execution}, saveWait)
	return out
}

// WaitRun waits until nothing of a run is pending, for a bounded time.
func (r *Recorder) WaitRun(tenant, runID string) {
	r.waitUntil(func() bool { return r.runs[runKey{tenant, runID}] == 0 }, saveWait)
}

// add queues a record for the store; it reports false, having counted
// and logged the record as dropped, when the recorder is closed or its
// pending bounds are reached.
func (r *Recorder) add(key execKey, rec store.EvidenceRecord) bool {
	r.mu.Lock()
	refused := r.refuse(len(rec.Data))
	if refused != "" {
		r.dropped++
		dropped := r.dropped
		r.mu.Unlock()
		r.dropLog.Log(r.log, slog.LevelWarn, refused, "runs: agent evidence dropped", "reason", refused, "run", key.run.runID, "dropped", dropped)
		return false
	}
	defer r.mu.Unlock()
	r.pending = append(r.pending, pendingEvidence{key, rec})
	r.size += len(rec.Data)
	r.held += len(rec.Data)
	r.records++
	r.unsaved[key]++
	r.runs[key.run]++
	if r.size >= batchBytes {
		r.hurry()
	}
	if !r.flushing {
		r.flushing = true
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.flush()
		}()
	}
	return true
}

// refuse says why a record of n bytes cannot be queued ("" when it can);
// the caller holds r.mu.
func (r *Recorder) refuse(n int) string {
	switch {
	case r.closed:
		return "closed"
	case r.held+n > maxPending || r.records >= maxPendingRecords:
		return "pending bound"
	}
	return ""
}

// Close refuses further records and waits for the flusher to write what
// is pending, without lingering.
func (r *Recorder) Close() {
	r.mu.Lock()
	r.closed = true
	r.hurry()
	r.mu.Unlock()
	r.wg.Wait()
}

// droppedRecords is how many records were refused.
func (r *Recorder) droppedRecords() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// flush writes pending evidence, a batch of one run at a time, until none
// is left. A record of a run that no longer exists is dropped; a failed
// write drops its batch (the export then reports the gap).
func (r *Recorder) flush() {
	for {
		r.linger()
		batch, ok := r.next()
		if !ok {
			return
		}
		recs := merge(batch)
		run := batch[0].key.run
		err := r.st.AppendEvidence(context.Background(), run.tk, run.runID, recs)
		if err != nil && !errors.Is(err, store.ErrNoRun) {
			r.log.Warn("runs: agent evidence dropped", "run", run.runID, "records", len(recs), "err", err)
		}
		r.done(batch)
	}
}

// hurry ends the flusher's linger; the caller holds r.mu.
func (r *Recorder) hurry() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// linger waits up to linger unless a full batch is pending, an ended
// execution waits or the recorder is closing.
func (r *Recorder) linger() {
	r.mu.Lock()
	full := r.size >= batchBytes || r.closed
	r.mu.Unlock()
	if full {
		return
	}
	t := time.NewTimer(linger)
	defer t.Stop()
	select {
	case <-r.kick:
	case <-t.C:
	}
}

// next takes the oldest pending records of one run, up to batchBytes
// bytes, or ends the flusher's turn.
func (r *Recorder) next() ([]pendingEvidence, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) == 0 {
		r.flushing = false
		r.pending = nil
		return nil, false
	}
	run := r.pending[0].key.run
	var batch []pendingEvidence
	rest := r.pending[:0:0]
	size := 0
	for _, p := range r.pending {
		if p.key.run == run && (size < batchBytes || len(batch) == 0) {
			batch = append(batch, p)
			size += len(p.rec.Data)
		} else {
			rest = append(rest, p)
		}
	}
	r.pending = rest
	r.size -= size
	return batch, true
}

func (r *Recorder) done(batch []pendingEvidence) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range batch {
		r.held -= len(p.rec.Data)
		r.records--
		if r.unsaved[p.key]--; r.unsaved[p.key] <= 0 {
			delete(r.unsaved, p.key)
		}
		if r.runs[p.key.run]--; r.runs[p.key.run] <= 0 {
			delete(r.runs, p.key.run)
		}
	}
	r.changed.Broadcast()
}

// waitSaved waits until nothing of an execution is pending, at most d.
func (r *Recorder) waitSaved(key execKey, d time.Duration) {
	r.waitUntil(func() bool { return r.unsaved[key] == 0 }, d)
}

// waitUntil waits until saved() (called with r.mu held), at most d.
func (r *Recorder) waitUntil(saved func() bool, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if saved() {
		return
	}
	r.hurry()
	expired := false
	t := time.AfterFunc(d, func() {
		r.mu.Lock()
		expired = true
		r.changed.Broadcast()
		r.mu.Unlock()
	})
	defer t.Stop()
	for !saved() && !expired {
		r.changed.Wait()
	}
}

// merge joins consecutive output pieces of one stream of one process into
// records of at most chunk bytes.
func merge(batch []pendingEvidence) []store.EvidenceRecord {
	var out []store.EvidenceRecord
	for _, p := range batch {
		rec := p.rec
		if n := len(out); n > 0 && (rec.Kind == evStdout || rec.Kind == evStderr) {
			last := &out[n-1]
			if last.Kind == rec.Kind && last.Execution == rec.Execution && last.Turn == rec.Turn &&
				len(last.Data)+len(rec.Data) <= chunk && offsetOf(last)+int64(len(last.Data)) == offsetOf(&rec) {
				last.Data = append(last.Data, rec.Data...)
				continue
			}
		}
		rec.Data = bytes.Clone(rec.Data)
		out = append(out, rec)
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// offsetOf is an output record's offset in its stream.
func offsetOf(r *store.EvidenceRecord) int64 {
	n, _ := strconv.ParseInt(r.Attr, 10, 64)
	return n
}

// evRecord is an evidence record of an execution's turn.
func evRecord(execution string, turn int, kind, attr string, data []byte) store.EvidenceRecord {
	return store.EvidenceRecord{Execution: execution, Turn: turn, Kind: kind, Attr: attr, Data: data}
}
