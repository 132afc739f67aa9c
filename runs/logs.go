package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// Durable logs. An execution's log lines become log records of its run:
// they are buffered per run and written in batches, by a flusher that
// runs while lines are pending, or by the next write for the run (a
// settlement, a void, the terminal, a force), which appends them first so
// that an execution's lines always precede its completion. A line the
// supervisor logs carries the run's lease as the supervisor held it then,
// and is written only while the lease is still held so: a replica that
// lost the run writes no more lines for it than results.

// Bounds of durable logs.
const (
	// maxLogRecords bounds a run's log records; later lines are dropped
	// after one record that says so.
	maxLogRecords = 100_000
	// logTarget is the target of every native log record.
	logTarget = "agent"
)

// logLine is one pending line of an execution ("" for run-wide lines).
// fence is the run's lease as its writer held it when it logged the line
// (the zero Fence for a line no supervisor logged): the line is written
// only while the lease is still held so (fencedLines).
type logLine struct {
	execution string
	record    protocol.LogRecord
	fence     store.Fence
}

type runKey struct{ tk, runID string }

// logBuffer holds pending lines per run; flush writes them while any are
// pending, on one goroutine at a time.
type logBuffer struct {
	flush func()

	mu       sync.Mutex
	pending  map[runKey][]logLine
	held     map[runKey]bool // runs whose lines wait for the store (logs_held.go)
	flushing bool
	wg       sync.WaitGroup
	// closed is closed by wait: a flusher waiting for the store gives up.
	closeOnce, stopOnce sync.Once
	closed              chan struct{}
}

func (l *logBuffer) closedCh() chan struct{} {
	l.closeOnce.Do(func() { l.closed = make(chan struct{}) })
	return l.closed
}

// closing is closed once the backend closes.
func (l *logBuffer) closing() <-chan struct{} { return l.closedCh() }

func (l *logBuffer) add(k runKey, line logLine) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		l.pending = map[runKey][]logLine{}
	}
	if l.full(k, line.execution) {
		return // the store is down and the execution's bound is reached
	}
	l.pending[k] = append(l.pending[k], line)
	if !l.flushing {
		l.flushing = true
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.flush()
		}()
	}
}

// take removes and returns a run's pending lines.
func (l *logBuffer) take(tk, runID string) []logLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := runKey{tk, runID}
	lines := l.pending[k]
	delete(l.pending, k)
	return lines
}

// next returns a run with pending lines, or ends the flusher's turn.
func (l *logBuffer) next() (runKey, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.pending {
		return k, true
	}
	l.flushing = false
	return runKey{}, false
}

// wait waits for the flusher; one waiting for the store gives up.
func (l *logBuffer) wait() {
	l.stopOnce.Do(func() { close(l.closedCh()) })
	l.wg.Wait()
}

// flushLogs writes pending lines run by run until none are left. A line
// of a run that has finished (or vanished) is dropped; lines the store
// could not take wait in the buffer (logs_held.go) and are tried again
// after logRetryPause, until the backend closes.
func (b *Backend) flushLogs() {
	for {
		k, ok := b.logs.next()
		if !ok {
			return
		}
		err := b.update(context.Background(), k.tk, k.runID, nil)
		switch {
		case errors.Is(err, store.ErrUnavailable):
			b.waitLog.Log(b.cfg.Log, slog.LevelWarn, "", "runs: log lines wait for the store", "run", k.runID, "err", err)
			select {
			case <-time.After(logRetryPause):
			case <-b.logs.closing():
				b.cfg.Log.Warn("runs: log lines dropped at shutdown: the store is unavailable", "run", k.runID)
				b.logs.take(k.tk, k.runID)
			}
		case err != nil:
			b.cfg.Log.Warn("runs: log lines dropped", "run", k.runID, "err", err)
		}
	}
}

// log buffers one log line of an execution (execution "" for the run),
// on no lease's behalf.
func (b *Backend) log(tk, runID, execution, level, message string) {
	b.logFenced(tk, runID, store.Fence{}, execution, level, message)
}

// logFenced buffers one log line written only while fence holds.
func (b *Backend) logFenced(tk, runID string, fence store.Fence, execution, level, message string) {
	if !slices.Contains(protocol.LogLevels, level) {
		level = "info"
	}
	b.logs.add(runKey{tk, runID}, logLine{execution: execution, fence: fence,
		record: protocol.LogRecord{Level: level, Target: logTarget, Message: SafeText(message, protocol.RedactedLogMessage)}})
}

// fencedLines drops, inside tx, the lines whose fence no longer holds:
// lines a process logged for a run it has since lost to another replica
// are never written, like its results. A fence that cannot be read fails
// the transaction (the lines are then kept, when the store is
// unavailable).
func fencedLines(tx store.ReadTx, lines []logLine) ([]logLine, error) {
	if !slices.ContainsFunc(lines, func(l logLine) bool { return l.fence != store.Fence{} }) {
		return lines, nil
	}
	held := map[store.Fence]bool{}
	kept := lines[:0:0]
	for _, l := range lines {
		ok, seen := held[l.fence]
		if !seen {
			err := l.fence.Check(tx)
			if err != nil && !errors.Is(err, store.ErrLeaseLost) {
				return nil, err
			}
			ok = err == nil
			held[l.fence] = ok
		}
		if ok {
			kept = append(kept, l)
		}
	}
	return kept, nil
}

// SafeText makes text a valid log message or attach output: control
// characters escaped visibly (a newline reads `\n`), and text over 16,384
// bytes replaced by marker.
func SafeText(text, marker string) string {
	return worker.SanitizeLine(text, protocol.MaxLogMessageBytes, marker)
}

// appendLogs appends lines as log records of a run that has not finished,
// up to maxLogRecords.
func appendLogs(tx store.Tx, tk, runID string, st *runState, lines []logLine) error {
	if st.Phase == PhaseFinished {
		return nil
	}
	for _, l := range lines {
		if st.Logs > maxLogRecords {
			return nil
		}
		rec := l.record
		if st.Logs == maxLogRecords {
			rec = protocol.LogRecord{Level: "warn", Target: logTarget, Message: fmt.Sprintf("log limit of %d records reached: later lines of this run are dropped", maxLogRecords)}
			l.execution = ""
		}
		detail, err := protocol.Marshal(rec)
		if err != nil {
			return err
		}
		if err := appendRecord(tx, tk, runID, st, record{Kind: recLog, Execution: l.execution, Detail: detail}); err != nil {
			return err
		}
		st.Logs++
	}
	return nil
}
