package runs

import (
	"context"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
)

// Live attach: the windows of live output and their relay across replicas
// are package runs/live's; the backend names each execution's window by
// attachKey and answers run/attach.

func attachKey(tk, runID, execution string) string { return tk + "\x00" + runID + "\x00" + execution }

// Attach streams an active execution's live output, running here or, on
// a store shared by replicas, on another replica. An unknown run or
// execution is NOT_FOUND; an execution that ended (or, on a store of one
// server, is not running in this process) is GONE.
func (b *Backend) Attach(ctx context.Context, runID, execution string) (*server.Subscription, error) {
	tk := b.tenant(ctx)
	key := attachKey(tk, runID, execution)
	e := b.live.Lookup(key)
	if e == nil {
		active := false
		err := b.store.View(ctx, func(tx store.ReadTx) error {
			st, _, ok, err := loadRun(tx, tk, runID)
			switch {
			case err != nil:
				return err
			case !ok:
				return errNoRun
			case st.execByRef(execution) == nil:
				return errNoExec
			}
			active = st.Phase != PhaseFinished && st.execByRef(execution).End == nil
			return errExecGone
		})
		if active {
			e = b.relay.Follow(key, b.execEnded(tk, runID, execution))
		}
		if e == nil {
			return nil, wire(err)
		}
	}
	prefix := append([]byte(`,"runId":`), protocol.AppendString(nil, runID)...)
	prefix = append(prefix, `,"execution":`...)
	prefix = protocol.AppendString(prefix, execution)
	prefix = append(prefix, `,"event":`...)
	id := b.nextSubscription("attach")
	return &server.Subscription{ID: id, Result: &SubscribeResult{SubscriptionID: id, RunID: runID, Execution: execution},
		Stream: e.Follow(prefix), MaxEventBytes: protocol.MaxNotificationBytes}, nil
}

// execEnded reads whether an execution has ended (its run finished, or
// its record is gone).
func (b *Backend) execEnded(tk, runID, execution string) func(ctx context.Context) bool {
	return func(ctx context.Context) bool {
		ended := false
		err := b.store.View(ctx, func(tx store.ReadTx) error {
			st, _, ok, err := loadRun(tx, tk, runID)
			if err == nil {
				ended = !ok || st.Phase == PhaseFinished || st.execByRef(execution) == nil || st.execByRef(execution).End != nil
			}
			return err
		})
		return err == nil && ended
	}
}
