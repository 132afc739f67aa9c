package main

import (
	"context"
	"strings"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/engine/harness"
)

// endRecordWait bounds the wait for an ended execution's end record, which
// the server writes as the execution ends but may commit after the run's
// status moved on.
const endRecordWait = 5 * time.Second

// execEnd is what an ended execution's log records say: how it ended
// (the outcome of its end record, "succeeded", "failed (CODE: REASON)",
// a failure followed by the execution's last other line, which usually
// says why; "" when no end record came within endRecordWait), the
// delivery receipt it logged, if any, and its retry notices.
type execEnd struct {
	how     string
	receipt *capsule.Receipt
	notices []client.RunLogEvent
}

// executionEnd reads an execution of run runID's log records up to its
// end record.
func executionEnd(ctx context.Context, conn *client.Conn, runID, execution string) execEnd {
	ctx, cancel := context.WithTimeout(ctx, endRecordWait)
	defer cancel()
	var end execEnd
	sub, _, err := conn.RunLogs(ctx, client.RunLogsParams{RunID: runID, Execution: execution})
	if err != nil {
		return end
	}
	defer sub.Close()
	last := ""
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				return end
			}
			msg := ev.Record.Message
			if r, ok := capsule.ParseReceiptRecord(msg); ok {
				end.receipt = &r
			}
			if strings.HasPrefix(msg, harness.RetryRecordPrefix) {
				end.notices = append(end.notices, ev)
			}
			outcome, isEnd := strings.CutPrefix(msg, capsule.EndRecordPrefix)
			if !isEnd {
				last = msg
				continue
			}
			if strings.HasPrefix(outcome, "failed") && last != "" {
				outcome += "; last line: " + truncate(last)
			}
			end.how = outcome
			return end
		case <-ctx.Done():
			return end
		}
	}
}
