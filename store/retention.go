package store

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// compactedKey is the cluster record holding the compaction watermark: the
// highest event sequence retention has deleted. No tenant key equals it.
const compactedKey = "\x00compacted"

// CompactedThrough returns the compaction watermark (0: nothing deleted).
// A cursor at or below it whose event is gone was compacted; one above it
// never existed.
func CompactedThrough(tx ReadTx) (uint64, error) {
	c, ok, err := tx.Cluster(compactedKey)
	if err != nil || !ok {
		return 0, err
	}
	n, err := strconv.ParseUint(string(c.Data), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("store: corrupt compaction watermark: %w", err)
	}
	return n, nil
}

// RaiseCompacted raises the compaction watermark to seq (never lowers it).
func RaiseCompacted(tx Tx, seq uint64) error {
	c, _, err := tx.Cluster(compactedKey)
	if err != nil {
		return err
	}
	cur, err := CompactedThrough(tx)
	if err != nil || seq <= cur {
		return err
	}
	return tx.PutCluster(compactedKey, Cluster{Version: c.Version + 1, Data: strconv.AppendUint(nil, seq, 10)})
}

// CompactIndex is the loop of a retention pass over an index whose
// numbers are times (Unix ns): in one Update it calls compact for at most
// limit entries below cutoff, oldest first, removes each from the index
// and returns how many it compacted (fewer than limit: none is left).
func CompactIndex(ctx context.Context, s Store, key string, cutoff time.Time, limit int, compact func(tx Tx, entry string) error) (int, error) {
	n := 0
	err := s.Update(ctx, func(tx Tx) error {
		n = 0
		old, err := tx.IndexBelow(key, uint64(max(cutoff.UnixNano(), 0)), limit)
		if err != nil {
			return err
		}
		for _, e := range old {
			if err := compact(tx, e.Entry); err != nil {
				return err
			}
			if err := tx.SetIndexEntry(key, e.Entry, 0); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
