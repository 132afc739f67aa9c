package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/client"
)

// receiptScanWait bounds the read of a run's log history for its delivery
// receipt (run status, and a watch that did not see every execution end).
const receiptScanWait = 30 * time.Second

// deliveryLines renders a delivery receipt for people: the branch that
// was pushed, then the pull request, by its address where the server
// knows one, else by its number.
func deliveryLines(r capsule.Receipt) []string {
	head := r.HeadRevision
	if len(head) > 12 {
		head = head[:12]
	}
	pr := "#" + r.PullRequestID
	if r.PullRequestURL != "" {
		pr = r.PullRequestURL
	}
	return []string{
		fmt.Sprintf("delivered: branch %s (head %s) of %s", r.Branch, head, r.Repository),
		fmt.Sprintf("pull request: %s into %s (%s)", pr, r.TargetBranch, r.Outcome),
	}
}

// runReceipt reads run runID's log history for its last delivery receipt
// (nil when it delivered nothing). The history of a finished run is its
// whole log; that of an unfinished one ends at st's cursor, or once no
// record came for logsQuiet.
func runReceipt(ctx context.Context, conn *client.Conn, st *client.RunStatusResult) (*capsule.Receipt, error) {
	ctx, cancel := context.WithTimeout(ctx, receiptScanWait)
	defer cancel()
	sub, _, err := conn.RunLogs(ctx, client.RunLogsParams{RunID: st.RunID})
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	end, bounded := cursorSeq(st.AtCursor)
	bounded = bounded && st.Status.Phase != "finished"
	quiet := time.NewTimer(logsQuiet)
	defer quiet.Stop()
	var last *capsule.Receipt
	for {
		select {
		case ev, open := <-sub.Events():
			if !open {
				if err := sub.Err(); err != nil && !client.Done(err) {
					return last, err
				}
				return last, nil
			}
			if r, ok := capsule.ParseReceiptRecord(ev.Record.Message); ok {
				last = &r
			}
			if seq, ok := cursorSeq(ev.Cursor); bounded && ok && seq >= end {
				return last, nil
			}
			if bounded {
				quiet.Reset(logsQuiet)
			}
		case <-quiet.C:
			if bounded {
				return last, nil
			}
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
}

// withDelivery adds "delivery": r to a JSON object (a run/status result)
// after the server's own members; raw is returned as it was when r is nil
// or raw is no object.
func withDelivery(raw json.RawMessage, r *capsule.Receipt) json.RawMessage {
	body := bytes.TrimSpace(raw)
	if r == nil || len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return raw
	}
	b, err := json.Marshal(r)
	if err != nil {
		return raw
	}
	out := append([]byte(nil), body[:len(body)-1]...)
	if len(bytes.TrimSpace(body[1:len(body)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"delivery":`...)
	out = append(out, b...)
	return append(out, '}')
}
