package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// Retention of v1 runs. A run ends when another run of its cluster
// supersedes it (apply of a changed graph, resubmit) or the cluster is
// deleted; it is then entered in the ended-run index with the time. The
// cluster's current run is never compacted. Compact deletes, a bounded
// batch per transaction, the runs that ended before a cutoff — record,
// events, execution log and lease — drops them from their cluster's run list and raises
// the store's compaction watermark past their last event. Idempotency
// receipts are kept: nothing ties a receipt to a run.
//
//	index  endedKey   tenant key NUL runId → end time (Unix ns)

const endedKey = "\x00ended-runs"

// markEnded enters a run that has just been superseded or deleted in the
// ended-run index.
func markEnded(tx store.Tx, tenant, runID string) error {
	return tx.SetIndexEntry(endedKey, tenant+"\x00"+runID, uint64(time.Now().UnixNano()))
}

// Compact deletes the history of at most limit v1 runs that ended before
// cutoff, oldest first, in one transaction, and returns how many it
// deleted (fewer than limit: none is left).
func (b *Backend) Compact(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	return store.CompactIndex(ctx, b.store, endedKey, cutoff, limit, func(tx store.Tx, entry string) error {
		tenant, runID, _ := strings.Cut(entry, "\x00")
		if err := compactRun(tx, tenant, runID); err != nil {
			return fmt.Errorf("cluster: compact %s: %w", runID, err)
		}
		return nil
	})
}

// compactRun deletes one ended run and drops it from its cluster's run
// list (unless it became current again, which a run id never does).
func compactRun(tx store.Tx, tenant, runID string) error {
	r, ok, err := tx.Run(tenant, runID)
	if err != nil || !ok {
		return err
	}
	st, version, err := load(tx, tenant)
	if err != nil {
		return err
	}
	if st.RunID == runID {
		return nil
	}
	if i := indexOf(st.Runs, runID); i >= 0 {
		st.Runs = append(st.Runs[:i:i], st.Runs[i+1:]...)
		if err := save(tx, tenant, st, version); err != nil {
			return err
		}
	}
	return errors.Join(tx.DeleteRun(tenant, runID), tx.DeleteLease(store.RunLease(tenant, runID)), deleteLog(tx, runID),
		store.RaiseCompacted(tx, r.LastSeq))
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// compactedCursor is the answer to a watch of a run that no longer exists
// from a cursor at or below the compaction watermark: GONE naming the
// watermark, which a client tells apart from the NOT_FOUND of a run or a
// cursor that never existed. It returns nil for any other cursor.
func compactedCursor(tx store.ReadTx, fromCursor *string) error {
	if fromCursor == nil {
		return nil
	}
	seq, ok := parseCursor(*fromCursor)
	if !ok {
		return nil
	}
	through, err := store.CompactedThrough(tx)
	if err != nil || seq > through {
		return err
	}
	return protocol.AppError(protocol.Gone, protocol.MsgRunGone, map[string]any{"compactedThrough": cursorString(through)})
}
