// Package logbuf buffers the durable log lines of native runs until they
// are written. Lines are kept per run, in the order they were logged; a
// flusher runs while any are pending and hands each such run to the
// buffer's write function, which takes the run's lines (Take) and
// appends them as records of the run. Any other write of the run may take
// them first, so that an execution's lines precede its completion. A line
// a write of its run is about to follow may be deferred (Defer): it
// starts no flusher, so that write carries it instead of a commit of its
// own.
//
// Lines outlive a store that cannot write: lines whose write failed
// because the store is unavailable (a database that is down or
// restarting) go back to the buffer (Hold), ahead of the lines logged
// since, and the flusher tries again after a pause until the buffer is
// closed. While a run's lines are held, at most MaxHeld lines of each
// execution are kept; later ones are dropped and counted in the server's
// log. A successful write of the run (Release) ends the bound.
//
// A line may carry the run's lease as its writer held it when it logged
// the line; Fenced keeps, inside the write's transaction, only the lines
// whose lease is still held so.
//
// The package imports protocol, store and internal/lograte, nothing of
// package runs.
package logbuf

import (
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/oecp/oecp/internal/lograte"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// MaxHeld bounds the lines of one execution (or of the run itself) kept
// while the store cannot write.
const MaxHeld = 1000

// retryPause is how long the flusher waits before it tries again to write
// lines the store could not take.
const retryPause = time.Second

// Line is one pending line of an execution ("" for a run-wide line).
// Fence is the run's lease as its writer held it when it logged the line
// (the zero Fence for a line no supervisor logged): the line is written
// only while the lease is still held so (Fenced).
type Line struct {
	Execution string
	Record    protocol.LogRecord
	Fence     store.Fence
}

type runKey struct{ tk, runID string }

// Buffer holds pending lines per run. It is safe for concurrent use.
type Buffer struct {
	write   func(tk, runID string) error
	log     *slog.Logger
	waitLog lograte.Limiter // repeats of the line logged while the store cannot take lines

	mu       sync.Mutex
	pending  map[runKey][]Line
	held     map[runKey]bool // runs whose lines wait for the store
	flushing bool
	wg       sync.WaitGroup
	// closed is closed by Close: a flusher waiting for the store gives up.
	closed    chan struct{}
	closeOnce sync.Once
}

// New returns a buffer whose flusher calls write for each run with
// pending lines, one run at a time. write takes the run's lines and
// writes them; a write that fails with store.ErrUnavailable leaves them
// held (Hold) and is tried again after a pause.
func New(write func(tk, runID string) error, log *slog.Logger) *Buffer {
	return &Buffer{write: write, log: log, pending: map[runKey][]Line{}, held: map[runKey]bool{}, closed: make(chan struct{})}
}

// Add buffers a line of a run and starts the flusher if none runs. While
// the run's lines are held, a line past MaxHeld of its execution is
// dropped; after Close every line is.
func (b *Buffer) Add(tk, runID string, line Line) { b.add(runKey{tk, runID}, line, 0) }

// Defer buffers a line of a run that a write of the run is expected to
// follow closely (a workspace's "ready" before the dispatch it allows),
// without starting the flusher: that write takes the line into its own
// transaction. The flusher writes the line when no write of the run has
// taken it within after, when another line started the flusher, or at
// Close. The bound of a held run applies as to Add.
func (b *Buffer) Defer(tk, runID string, line Line, after time.Duration) {
	b.add(runKey{tk, runID}, line, after)
}

// add buffers line and starts the flusher after that long (now when
// after is not positive).
func (b *Buffer) add(k runKey, line Line, after time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.closed:
		return // no flusher may start after Close's Wait
	default:
	}
	if b.full(k, line.Execution) {
		return // the store is down and the execution's bound is reached
	}
	b.pending[k] = append(b.pending[k], line)
	if after > 0 {
		time.AfterFunc(after, b.kick)
		return
	}
	b.startLocked()
}

// kick starts the flusher if lines are pending and the buffer is open.
func (b *Buffer) kick() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.closed:
		return
	default:
	}
	if len(b.pending) > 0 {
		b.startLocked()
	}
}

// startLocked starts the flusher unless one runs; b.mu is held and the
// buffer is open.
func (b *Buffer) startLocked() {
	if !b.flushing {
		b.flushing = true
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.flush()
		}()
	}
}

// Take removes and returns a run's pending lines.
func (b *Buffer) Take(tk, runID string) []Line {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := runKey{tk, runID}
	lines := b.pending[k]
	delete(b.pending, k)
	return lines
}

// Hold puts lines a write took but could not write back ahead of the
// run's pending lines, keeping at most MaxHeld per execution; until a
// write of the run succeeds (Release), Add keeps to the same bound.
// Lines dropped are counted in the server's log.
func (b *Buffer) Hold(tk, runID string, lines []Line) {
	if dropped := b.hold(runKey{tk, runID}, lines); dropped > 0 {
		b.log.Warn("runs: log lines dropped while the store is unavailable", "run", runID, "dropped", dropped, "kept_per_execution", MaxHeld)
	}
}

func (b *Buffer) hold(k runKey, lines []Line) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held[k] = true
	all := append(lines, b.pending[k]...)
	count := map[string]int{}
	kept := all[:0]
	for _, line := range all {
		if count[line.Execution]++; count[line.Execution] <= MaxHeld {
			kept = append(kept, line)
		}
	}
	b.pending[k] = kept
	return len(all) - len(kept)
}

// Release ends the bound of a run whose write succeeded.
func (b *Buffer) Release(tk, runID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.held, runKey{tk, runID})
}

// Close writes the pending lines (deferred ones included) and waits for
// the flusher; one waiting for the store gives up and drops the run's
// lines. Lines added after it are dropped.
func (b *Buffer) Close() {
	b.mu.Lock()
	b.closeOnce.Do(func() {
		if len(b.pending) > 0 {
			b.startLocked()
		}
		close(b.closed)
	})
	b.mu.Unlock()
	b.wg.Wait()
}

// full reports whether a held run already keeps MaxHeld lines of
// execution; b.mu is held.
func (b *Buffer) full(k runKey, execution string) bool {
	if !b.held[k] {
		return false
	}
	n := 0
	for _, line := range b.pending[k] {
		if line.Execution == execution {
			n++
		}
	}
	return n >= MaxHeld
}

// next returns a run with pending lines, or ends the flusher's turn.
func (b *Buffer) next() (runKey, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.pending {
		return k, true
	}
	b.flushing = false
	return runKey{}, false
}

// flush writes pending lines run by run until none are left. Lines the
// write could not write because the store is unavailable wait in the
// buffer and are tried again after retryPause, until the buffer closes.
func (b *Buffer) flush() {
	for {
		k, ok := b.next()
		if !ok {
			return
		}
		err := b.write(k.tk, k.runID)
		switch {
		case errors.Is(err, store.ErrUnavailable):
			b.waitLog.Log(b.log, slog.LevelWarn, "", "runs: log lines wait for the store", "run", k.runID, "err", err)
			select {
			case <-time.After(retryPause):
			case <-b.closed:
				b.log.Warn("runs: log lines dropped at shutdown: the store is unavailable", "run", k.runID)
				b.Take(k.tk, k.runID)
			}
		case err != nil:
			b.log.Warn("runs: log lines dropped", "run", k.runID, "err", err)
		}
	}
}

// Fenced drops, inside tx, the lines whose fence no longer holds: lines
// a process logged for a run it has since lost to another replica are
// never written, like its results. A fence that cannot be read fails the
// transaction (the lines are then kept, when the store is unavailable).
func Fenced(tx store.ReadTx, lines []Line) ([]Line, error) {
	if !slices.ContainsFunc(lines, func(l Line) bool { return l.Fence != store.Fence{} }) {
		return lines, nil
	}
	held := map[store.Fence]bool{}
	kept := lines[:0:0]
	for _, l := range lines {
		ok, seen := held[l.Fence]
		if !seen {
			err := l.Fence.Check(tx)
			if err != nil && !errors.Is(err, store.ErrLeaseLost) {
				return nil, err
			}
			ok = err == nil
			held[l.Fence] = ok
		}
		if ok {
			kept = append(kept, l)
		}
	}
	return kept, nil
}
