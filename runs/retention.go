package runs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// Retention: a finished run is entered in the finished-run index with the
// time it finished; Compact deletes, a bounded batch per transaction, the
// runs that finished before a cutoff — their records, events (log lines
// included), state, workspace checkpoint (deleted with the run record),
// index entries, submission receipt and lease — and raises the store's
// compaction watermark past their last cursor.
//
//	index  finishedKey   every finished run (tenant key NUL runId → finish
//	                     time, Unix ns)

const finishedKey = "\x00native-finished"

// markFinished enters a run that has just finished in the finished-run
// index.
func markFinished(tx store.Tx, tk, runID string) error { return markNow(tx, finishedKey, tk, runID) }

// markNow enters a run in the time index key (the numbers
// store.CompactIndex compares with its cutoff: Unix ns) with the time now.
func markNow(tx store.Tx, key, tk, runID string) error {
	return tx.SetIndexEntry(key, activeEntry(tk, runID), uint64(time.Now().UnixNano()))
}

// Compact deletes the history of at most limit native runs that finished
// before cutoff, oldest first, in one transaction, and returns how many
// it deleted (fewer than limit: none is left).
func (b *Backend) Compact(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	if err := forgetGone(ctx, b.store, cutoff, limit); err != nil {
		return 0, err
	}
	compact := func(tx store.Tx, entry string) error {
		tk, runID := splitActive(entry)
		if err := compactRun(tx, tk, runID); err != nil {
			return fmt.Errorf("runs: compact %s: %w", runID, err)
		}
		return nil
	}
	return store.CompactIndex(ctx, b.store, finishedKey, cutoff, limit, compact)
}

// compactRun deletes one finished run's history.
func compactRun(tx store.Tx, tk, runID string) error {
	st, _, ok, err := loadRun(tx, tk, runID)
	if err != nil {
		return err
	}
	if ok {
		if st.Key != "" {
			if err := tx.DeleteIdempotency(tk, submissionPrefix+st.Key); err != nil {
				return err
			}
		}
		if err := store.RaiseCompacted(tx, st.Cursor); err != nil {
			return err
		}
	}
	if err := tx.DeleteRun(tk, runID); err != nil && !errors.Is(err, store.ErrNoRun) {
		return err
	}
	return errors.Join(
		tx.DeleteLease(store.RunLease(tk, runID)),
		tx.SetIndexEntry(indexKey(tk), runID, 0),
		markNow(tx, goneKey, tk, runID))
}

// compactedCursor answers a watch or logs replay from a cursor of a run
// that retention deleted: GONE with the compaction watermark, which a
// client tells apart from the NOT_FOUND of a run that never existed.
// It returns nil when the cursor is not one that was compacted.
func compactedCursor(tx store.ReadTx, fromCursor *string) error {
	if fromCursor == nil {
		return nil
	}
	seq, ok := parseCursor(*fromCursor)
	if !ok || seq == 0 {
		return nil
	}
	through, err := store.CompactedThrough(tx)
	if err != nil || seq > through {
		return err
	}
	return protocol.AppError(protocol.Gone, protocol.MsgRunGone, map[string]any{"compactedThrough": "v2:" + strconv.FormatUint(through, 10)})
}
