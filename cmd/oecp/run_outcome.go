package main

import (
	"context"
	"strings"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/client"
)

// endRecordWait bounds the wait for an ended execution's end record, which
// the server writes as the execution ends but may commit after the run's
// status moved on.
const endRecordWait = 5 * time.Second

// executionEnd says how an execution of run runID ended, from its log
// records: the outcome of its end record ("succeeded", "failed (CODE:
// REASON)"), a failure followed by the execution's last other line, which
// usually says why ("" when no end record came within endRecordWait).
func executionEnd(ctx context.Context, conn *client.Conn, runID, execution string) string {
	ctx, cancel := context.WithTimeout(ctx, endRecordWait)
	defer cancel()
	sub, _, err := conn.RunLogs(ctx, client.RunLogsParams{RunID: runID, Execution: execution})
	if err != nil {
		return ""
	}
	defer sub.Close()
	last := ""
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				return ""
			}
			msg := ev.Record.Message
			outcome, isEnd := strings.CutPrefix(msg, capsule.EndRecordPrefix)
			if !isEnd {
				last = msg
				continue
			}
			if strings.HasPrefix(outcome, "failed") && last != "" {
				outcome += "; last line: " + truncate(last)
			}
			return outcome
		case <-ctx.Done():
			return ""
		}
	}
}
