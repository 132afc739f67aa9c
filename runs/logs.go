package runs

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs/logbuf"
	"github.com/oecp/oecp/store"
)

// Durable logs. An execution's log lines become log records of its run:
// they are buffered per run (package runs/logbuf) and written in
// batches, by the buffer's flusher while lines are pending, or by the
// next write for the run (a settlement, a void, the terminal, a force),
// which appends them first so that an execution's lines always precede
// its completion. A line the supervisor logs carries the run's lease as
// the supervisor held it then, and is written only while the lease is
// still held so: a replica that lost the run writes no more lines for it
// than results.

// Bounds of durable logs.
const (
	// maxLogRecords bounds a run's log records; later lines are dropped
	// after one record that says so.
	maxLogRecords = 100_000
	// logTarget is the target of every native log record.
	logTarget = "agent"
	// deferredLogWait bounds how long a line logged just before a write
	// of its run waits for that write (logBeforeWrite).
	deferredLogWait = 100 * time.Millisecond
)

// writeLogs is the log buffer's write: a write of the run that appends
// its pending lines and nothing else. Lines of a run that has finished
// (or vanished) are dropped.
func (b *Backend) writeLogs(tk, runID string) error {
	return b.update(context.Background(), tk, runID, nil)
}

// log buffers one log line of an execution (execution "" for the run),
// on no lease's behalf.
func (b *Backend) log(tk, runID, execution, level, message string) {
	b.logFenced(tk, runID, store.Fence{}, execution, level, message)
}

// logFenced buffers one log line written only while fence holds.
func (b *Backend) logFenced(tk, runID string, fence store.Fence, execution, level, message string) {
	b.logs.Add(tk, runID, logLine(fence, execution, level, message))
}

// logBeforeWrite buffers a run-wide line, written only while fence
// holds, that a write of the run follows closely (the dispatch a ready
// workspace allows): that write carries it, instead of a commit of its
// own just before it. Should no write of the run come within
// deferredLogWait (the run waits for an execution slot), it is written on
// its own.
func (b *Backend) logBeforeWrite(tk, runID string, fence store.Fence, message string) {
	b.logs.Defer(tk, runID, logLine(fence, "", "info", message), deferredLogWait)
}

// logLine is a native log line: an unknown level read as info, the
// message made safe to show.
func logLine(fence store.Fence, execution, level, message string) logbuf.Line {
	if !slices.Contains(protocol.LogLevels, level) {
		level = "info"
	}
	return logbuf.Line{Execution: execution, Fence: fence,
		Record: protocol.LogRecord{Level: level, Target: logTarget, Message: SafeText(message, protocol.RedactedLogMessage)}}
}

// SafeText makes text a valid log message or attach output: control
// characters escaped visibly (a newline reads `\n`), and text over 16,384
// bytes replaced by marker.
func SafeText(text, marker string) string {
	return worker.SanitizeLine(text, protocol.MaxLogMessageBytes, marker)
}

// appendLogs appends lines as log records of a run that has not finished,
// up to maxLogRecords.
func appendLogs(tx store.Tx, tk, runID string, st *runState, lines []logbuf.Line) error {
	if st.Phase == PhaseFinished {
		return nil
	}
	for _, l := range lines {
		if st.Logs > maxLogRecords {
			return nil
		}
		rec := l.Record
		if st.Logs == maxLogRecords {
			rec = protocol.LogRecord{Level: "warn", Target: logTarget, Message: fmt.Sprintf("log limit of %d records reached: later lines of this run are dropped", maxLogRecords)}
			l.Execution = ""
		}
		detail, err := protocol.Marshal(rec)
		if err != nil {
			return err
		}
		if err := appendRecord(tx, tk, runID, st, record{Kind: recLog, Execution: l.Execution, Detail: detail}); err != nil {
			return err
		}
		st.Logs++
	}
	return nil
}
