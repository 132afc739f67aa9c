package runs

import (
	"context"
	"time"

	"github.com/oecp/oecp/store"
)

// Deleted runs: retention enters every run it deletes in the deleted-run
// index with the time it deleted it (markNow), and forgets the entry once
// another retention period has passed. Until then an export of the run
// answers GONE (its history was deleted) rather than NOT_FOUND (no such
// run).
//
//	index  goneKey   every recently deleted run (tenant key NUL runId →
//	                 deletion time, Unix ns)

const goneKey = "\x00native-gone"

// forgetGone drops, in batches of limit, the entries of runs deleted
// before cutoff.
func forgetGone(ctx context.Context, s store.Store, cutoff time.Time, limit int) error {
	for {
		n, err := store.CompactIndex(ctx, s, goneKey, cutoff, limit, func(store.Tx, string) error { return nil })
		if err != nil || n < limit {
			return err
		}
	}
}

// wasDeleted reports whether retention deleted the run recently.
func wasDeleted(tx store.ReadTx, tk, runID string) (bool, error) {
	_, ok, err := tx.IndexEntry(goneKey, activeEntry(tk, runID))
	return ok, err
}
