package main

import (
	"context"
	"slices"
	"time"

	"github.com/oecp/oecp/client"
)

// runExecutions replays run runID's watch history and returns every
// execution the run has had, in the order they started: ended ones
// included, which run/status no longer lists. The stream marks no end of
// history, so the replay ends at the run's finish, at the cursor its
// status reported, at an event showing the status's very active
// executions, or after logsQuiet without events.
func runExecutions(ctx context.Context, conn *client.Conn, runID string) ([]client.RunExecution, error) {
	st, err := conn.RunStatus(ctx, runID)
	if err != nil {
		return nil, err
	}
	var out []client.RunExecution
	add := func(xs []client.RunExecution) {
		for _, x := range xs {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	if end, ok := cursorSeq(st.AtCursor); ok && end > 0 {
		if err := replayStatuses(ctx, conn, runID, func(ev client.RunWatchEvent) bool {
			add(ev.Status.ActiveExecutions)
			seq, ok := cursorSeq(ev.Cursor)
			now := st.Status.ActiveExecutions
			return ev.Status.Phase == "finished" || (ok && seq >= end) || (len(now) > 0 && slices.Equal(ev.Status.ActiveExecutions, now))
		}); err != nil {
			return nil, err
		}
	}
	add(st.Status.ActiveExecutions)
	return out, nil
}

// replayStatuses hands run runID's watch events to seen until it says
// the history is over, the stream ends, or no event came for logsQuiet.
func replayStatuses(ctx context.Context, conn *client.Conn, runID string, seen func(client.RunWatchEvent) (over bool)) error {
	sub, _, err := conn.RunWatch(ctx, client.RunWatchParams{RunID: runID})
	if err != nil {
		return err
	}
	defer sub.Close()
	quiet := time.NewTimer(logsQuiet)
	defer quiet.Stop()
	for {
		select {
		case ev, open := <-sub.Events():
			if !open {
				if err := sub.Err(); err != nil && !client.Done(err) {
					return err
				}
				return nil
			}
			if seen(ev) {
				return nil
			}
			quiet.Reset(logsQuiet)
		case <-quiet.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// latestExecution is the execution ref arg names among a run's executions:
// arg itself when it is one, else the latest execution of the node it
// names; ok is false when it names neither.
func latestExecution(execs []client.RunExecution, arg string) (ref string, ok bool) {
	for _, x := range execs {
		if x.Execution == arg {
			return arg, true
		}
	}
	for _, x := range slices.Backward(execs) {
		if x.Node == arg {
			return x.Execution, true
		}
	}
	return "", false
}
