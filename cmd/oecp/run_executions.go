package main

import (
	"context"
	"slices"

	"github.com/oecp/oecp/client"
)

// runExecutions replays run runID's watch history up to the cursor its
// status reports (or its end) and returns every execution the run has
// had, in the order they started: ended ones included, which run/status
// no longer lists.
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
	end, ok := cursorSeq(st.AtCursor)
	if ok && end > 0 {
		sub, _, err := conn.RunWatch(ctx, client.RunWatchParams{RunID: runID})
		if err != nil {
			return nil, err
		}
		defer sub.Close()
	replay:
		for {
			select {
			case ev, open := <-sub.Events():
				if !open {
					if err := sub.Err(); err != nil {
						return nil, err
					}
					break replay
				}
				add(ev.Status.ActiveExecutions)
				if seq, ok := cursorSeq(ev.Cursor); ev.Status.Phase == "finished" || (ok && seq >= end) {
					break replay
				}
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	add(st.Status.ActiveExecutions)
	return out, nil
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
