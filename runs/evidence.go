package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/lograte"
	"github.com/oecp/oecp/redact"
	"github.com/oecp/oecp/runs/export"
	"github.com/oecp/oecp/store"
)

// Evidence: for every agent process of a run, the exact prompt it was
// given and the raw bytes it wrote, kept with the run's records
// (store.Evidence) so that the run can be exported. The processes report
// through a worker.Tap; the tap only appends to memory and a flusher
// writes batches to the store, so an agent never waits on the store.
// Before an execution's outcome is recorded, its evidence is given a
// bounded time to reach the store, so that a finished run's export is
// complete.

// Bounds of the evidence kept.
const (
	// maxEvidenceStream bounds what is kept of one stream (stdout or
	// stderr) of one process: the drivers' per-process stdout cap. The
	// rest is not kept and the export's footer says so.
	maxEvidenceStream = 8 << 20
	// evidenceChunk bounds one stored output record; the flusher merges
	// consecutive pieces of a stream up to it.
	evidenceChunk = 64 << 10
	// evidenceBatch bounds the bytes one store write carries.
	evidenceBatch = 1 << 20
	// evidenceWait bounds how long an ended execution waits for its
	// evidence to be written before its outcome is recorded anyway.
	evidenceWait = 30 * time.Second
	// evidenceLinger is how long the flusher lets pieces gather before a
	// write that is neither full (evidenceBatch) nor awaited by an ended
	// execution, so that a chatty process costs a few transactions a
	// second, not one per read.
	evidenceLinger = 250 * time.Millisecond
	// maxEvidencePending and maxEvidencePendingRecords bound the evidence
	// queued for the store or being written, all runs together. Past
	// either a record is dropped, counted and logged rather than made to
	// wait: an agent never waits on the store, and the export reports the
	// gap or the lost end.
	maxEvidencePending        = 64 << 20
	maxEvidencePendingRecords = 1 << 16
	// redactedEvidence replaces a spelling of a declared variable's value.
	redactedEvidence = redact.Marker
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

type execKey struct {
	run       runKey
	execution string
}

type pendingEvidence struct {
	key execKey
	rec store.EvidenceRecord
}

// evidenceRecorder queues evidence and writes it in batches, one flusher
// at a time while anything is pending. Once closed it takes no record: a
// flusher is only started under mu while it is open, so close's Wait
// never races an Add, and a record that comes after is counted as
// dropped, never left pending with nobody to write it.
type evidenceRecorder struct {
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

// evidenceTap returns the worker.Tap of one execution of a run. values
// are the spellings of the declared variables' values
// (recordRedactor.byteValues), redacted from what it records.
func (b *Backend) evidenceTap(tk, runID, execution string, values [][]byte) worker.Tap {
	return &execTap{b: b, key: execKey{runKey{tk, runID}, execution}, red: newRedactor(values)}
}

// withEvidence runs an agent execution with the tap of its evidence, then
// waits (at most evidenceWait) for the evidence to be written.
func (b *Backend) withEvidence(tk, runID, execution string, values [][]byte, run func(worker.Tap) worker.Outcome) worker.Outcome {
	out := run(b.evidenceTap(tk, runID, execution, values))
	b.evidence.waitSaved(execKey{runKey{tk, runID}, execution}, evidenceWait)
	return out
}

// add queues a record for the store; it reports false, having counted
// and logged the record as dropped, when the recorder is closed or its
// pending bounds are reached.
func (r *evidenceRecorder) add(b *Backend, key execKey, rec store.EvidenceRecord) bool {
	r.mu.Lock()
	refused := r.refuse(len(rec.Data))
	if refused != "" {
		r.dropped++
		dropped := r.dropped
		r.mu.Unlock()
		r.dropLog.Log(b.cfg.Log, slog.LevelWarn, refused, "runs: agent evidence dropped", "reason", refused, "run", key.run.runID, "dropped", dropped)
		return false
	}
	defer r.mu.Unlock()
	if r.unsaved == nil {
		r.unsaved, r.runs = map[execKey]int{}, map[runKey]int{}
		r.changed = sync.NewCond(&r.mu)
		r.kick = make(chan struct{}, 1)
	}
	r.pending = append(r.pending, pendingEvidence{key, rec})
	r.size += len(rec.Data)
	r.held += len(rec.Data)
	r.records++
	r.unsaved[key]++
	r.runs[key.run]++
	if r.size >= evidenceBatch {
		r.hurry()
	}
	if !r.flushing {
		r.flushing = true
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.flush(b)
		}()
	}
	return true
}

// refuse says why a record of n bytes cannot be queued ("" when it can);
// the caller holds r.mu.
func (r *evidenceRecorder) refuse(n int) string {
	switch {
	case r.closed:
		return "closed"
	case r.held+n > maxEvidencePending || r.records >= maxEvidencePendingRecords:
		return "pending bound"
	}
	return ""
}

// close refuses further records and waits for the flusher to write what
// is pending, without lingering.
func (r *evidenceRecorder) close() {
	r.mu.Lock()
	r.closed = true
	r.hurry()
	r.mu.Unlock()
	r.wg.Wait()
}

// droppedRecords is how many records were refused.
func (r *evidenceRecorder) droppedRecords() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// flush writes pending evidence, a batch of one run at a time, until none
// is left. A record of a run that no longer exists is dropped; a failed
// write drops its batch (the export then reports the gap).
func (r *evidenceRecorder) flush(b *Backend) {
	for {
		r.linger()
		batch, ok := r.next()
		if !ok {
			return
		}
		recs := mergeEvidence(batch)
		run := batch[0].key.run
		err := b.store.AppendEvidence(context.Background(), run.tk, run.runID, recs)
		if err != nil && !errors.Is(err, store.ErrNoRun) {
			b.cfg.Log.Warn("runs: agent evidence dropped", "run", run.runID, "records", len(recs), "err", err)
		}
		r.done(batch)
	}
}

// hurry ends the flusher's linger; the caller holds r.mu.
func (r *evidenceRecorder) hurry() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// linger waits up to evidenceLinger unless a full batch is pending, an
// ended execution waits or the recorder is closing.
func (r *evidenceRecorder) linger() {
	r.mu.Lock()
	full, kick := r.size >= evidenceBatch || r.closed, r.kick
	r.mu.Unlock()
	if full {
		return
	}
	t := time.NewTimer(evidenceLinger)
	defer t.Stop()
	select {
	case <-kick:
	case <-t.C:
	}
}

// next takes the oldest pending records of one run, up to evidenceBatch
// bytes, or ends the flusher's turn.
func (r *evidenceRecorder) next() ([]pendingEvidence, bool) {
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
		if p.key.run == run && (size < evidenceBatch || len(batch) == 0) {
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

func (r *evidenceRecorder) done(batch []pendingEvidence) {
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
func (r *evidenceRecorder) waitSaved(key execKey, d time.Duration) {
	r.waitUntil(func() bool { return r.unsaved[key] == 0 }, d)
}

// waitRun waits until nothing of a run is pending, at most d.
func (r *evidenceRecorder) waitRun(run runKey, d time.Duration) {
	r.waitUntil(func() bool { return r.runs[run] == 0 }, d)
}

// waitUntil waits until saved() (called with r.mu held), at most d.
func (r *evidenceRecorder) waitUntil(saved func() bool, d time.Duration) {
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

// mergeEvidence joins consecutive output pieces of one stream of one
// process into records of at most evidenceChunk bytes.
func mergeEvidence(batch []pendingEvidence) []store.EvidenceRecord {
	var out []store.EvidenceRecord
	for _, p := range batch {
		rec := p.rec
		if n := len(out); n > 0 && (rec.Kind == evStdout || rec.Kind == evStderr) {
			last := &out[n-1]
			if last.Kind == rec.Kind && last.Execution == rec.Execution && last.Turn == rec.Turn &&
				len(last.Data)+len(rec.Data) <= evidenceChunk && offsetOf(last)+int64(len(last.Data)) == offsetOf(&rec) {
				last.Data = append(last.Data, rec.Data...)
				continue
			}
		}
		rec.Data = bytes.Clone(rec.Data)
		out = append(out, rec)
	}
	return out
}

// execTap is the worker.Tap of one execution: each process it sees is the
// next turn.
type execTap struct {
	b   *Backend
	key execKey
	red redactor

	mu   sync.Mutex
	turn int
}

// Started records the process's prompt: its standard input, or its last
// argument when it was given no input.
func (t *execTap) Started(argv []string, stdin []byte) (func(string, []byte), func()) {
	t.mu.Lock()
	turn := t.turn
	t.turn++
	t.mu.Unlock()
	via, prompt := "stdin", stdin
	if len(stdin) == 0 {
		via, prompt = "argv", nil
		if len(argv) > 1 {
			prompt = []byte(argv[len(argv)-1])
		}
	}
	data, _ := t.red.redact(prompt, true)
	t.b.evidence.add(t.b, t.key, evRecord(t.key.execution, turn, evPrompt, via, data))
	p := &procTap{t: t, turn: turn, streams: map[string]*streamTap{evStdout: {kind: evStdout}, evStderr: {kind: evStderr}}}
	return p.raw, p.end
}

// procTap is one process's streams.
type procTap struct {
	t       *execTap
	turn    int
	streams map[string]*streamTap
}

// streamTap is one stream of a process. Each stream is read by one
// goroutine, so it needs no lock of its own.
type streamTap struct {
	kind      string
	held      []byte // the tail a declared value may still continue
	seen      int64  // raw bytes taken, up to maxEvidenceStream
	recorded  int64  // bytes recorded (after redaction)
	truncated bool
}

func (p *procTap) raw(stream string, b []byte) {
	s := p.streams[stream]
	if s == nil {
		return
	}
	if room := maxEvidenceStream - s.seen; int64(len(b)) > room {
		b, s.truncated = b[:max(room, 0)], true
	}
	s.seen += int64(len(b))
	if len(b) == 0 {
		return
	}
	p.emit(s, append(s.held, b...), false)
}

func (p *procTap) emit(s *streamTap, buf []byte, final bool) {
	out, held := p.t.red.redact(buf, final)
	s.held = held
	if len(out) == 0 {
		return
	}
	p.t.b.evidence.add(p.t.b, p.t.key, evRecord(p.t.key.execution, p.turn, s.kind, itoa(s.recorded), out))
	s.recorded += int64(len(out))
}

// end flushes what each stream held back and closes the process's
// evidence.
func (p *procTap) end() {
	out, errs := p.streams[evStdout], p.streams[evStderr]
	for _, s := range []*streamTap{out, errs} {
		if len(s.held) > 0 {
			p.emit(s, s.held, true)
		}
	}
	data, _ := json.Marshal(export.End{Stdout: out.recorded, Stderr: errs.recorded, StdoutTruncated: out.truncated, StderrTruncated: errs.truncated})
	p.t.b.evidence.add(p.t.b, p.t.key, evRecord(p.t.key.execution, p.turn, evEnd, "", data))
}

// redactor replaces values (the spellings of the declared values), longest
// first, in a stream that arrives in pieces: a tail that may be the start
// of a value is held back until the next piece (or the end) decides, so
// the tail held is at most the longest spelling less one byte. byFirst
// indexes the values by their first byte, longest first, so a byte no
// value starts with costs one lookup however many spellings there are.
type redactor struct {
	values  [][]byte
	byFirst *[256][][]byte
}

func newRedactor(values [][]byte) redactor {
	sort.SliceStable(values, func(i, j int) bool { return len(values[i]) > len(values[j]) })
	r := redactor{values: values, byFirst: new([256][][]byte)}
	for _, v := range values {
		if len(v) > 0 {
			r.byFirst[v[0]] = append(r.byFirst[v[0]], v)
		}
	}
	return r
}

// redact returns buf with every declared value replaced, and the tail to
// hold back (none when final).
func (r redactor) redact(buf []byte, final bool) (out, held []byte) {
	if len(r.values) == 0 {
		return bytes.Clone(buf), nil
	}
	start := 0
	for i := 0; i < len(buf); {
		if len(r.byFirst[buf[i]]) == 0 {
			i++
			continue
		}
		n, partial := r.matchAt(buf[i:], final)
		if partial {
			return append(out, buf[start:i]...), bytes.Clone(buf[i:])
		}
		if n == 0 {
			i++
			continue
		}
		out = append(append(out, buf[start:i]...), redactedEvidence...)
		i += n
		start = i
	}
	return append(out, buf[start:]...), nil
}

// matchAt is the length of the value rest starts with (0: none), or
// partial when rest is a proper prefix of a value and more may come.
func (r redactor) matchAt(rest []byte, final bool) (n int, partial bool) {
	for _, v := range r.byFirst[rest[0]] {
		if bytes.HasPrefix(rest, v) {
			return len(v), false
		}
		if !final && len(rest) < len(v) && bytes.HasPrefix(v, rest) {
			return 0, true
		}
	}
	return 0, false
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
