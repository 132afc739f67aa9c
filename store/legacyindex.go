package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// Indexes of earlier releases. An earlier release kept an index in
// cluster records, not in the store's indexes: the index named K in the
// records K + ".0" to K + ".31", each a JSON object of entry → number.
// MoveLegacyIndexes moves such an index into the store's indexes once;
// nothing else reads that layout.

// legacyBuckets is the number of records an earlier release spread one
// index over.
const legacyBuckets = 32

// LegacyIndex is an index an earlier release kept in cluster records
// under the name From, whose entries belong in the index To.
type LegacyIndex struct{ From, To string }

// UpgradeOnce runs upgrade once per store: it does nothing when the
// cluster record done exists, and otherwise runs upgrade (skipped when the
// store holds no event yet: an earlier release wrote nothing to move) and
// then writes done. upgrade must be safe to run again after a failure.
func UpgradeOnce(ctx context.Context, s Store, done string, upgrade func(context.Context) error) error {
	var finished, fresh bool
	err := s.View(ctx, func(tx ReadTx) error {
		_, ok, err := tx.Cluster(done)
		if err != nil || ok {
			finished = ok
			return err
		}
		last, err := tx.LastSeq()
		fresh = last == 0
		return err
	})
	if err != nil || finished {
		return err
	}
	if !fresh {
		if err := upgrade(ctx); err != nil {
			return err
		}
	}
	return s.Update(ctx, func(tx Tx) error {
		_, ok, err := tx.Cluster(done)
		if err != nil || ok {
			return err
		}
		return tx.PutCluster(done, Cluster{Version: 1, Data: []byte("done")})
	})
}

// MoveLegacyIndexes moves the entries of each legacy index into its
// index, where an entry already there keeps the larger of its numbers,
// and deletes the legacy records: one read transaction per legacy index
// (its bucket records) and one write transaction per record, so that no
// transaction grows with the number of indexes or entries.
func MoveLegacyIndexes(ctx context.Context, s Store, moves []LegacyIndex) error {
	for _, m := range moves {
		var present []string
		err := s.View(ctx, func(tx ReadTx) error {
			present = present[:0]
			for i := range legacyBuckets {
				record := m.From + "." + strconv.Itoa(i)
				_, ok, err := tx.Cluster(record)
				if err != nil {
					return err
				}
				if ok {
					present = append(present, record)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, record := range present {
			if err := s.Update(ctx, func(tx Tx) error { return moveLegacyRecord(tx, record, m.To) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// moveLegacyRecord moves the entries of one legacy record into the index
// to and deletes the record (nothing when another process moved it).
func moveLegacyRecord(tx Tx, record, to string) error {
	c, ok, err := tx.Cluster(record)
	if err != nil || !ok {
		return err
	}
	entries := map[string]uint64{}
	if err := json.Unmarshal(c.Data, &entries); err != nil {
		return fmt.Errorf("store: corrupt legacy index record %q: %w", record, err)
	}
	for entry, n := range entries {
		cur, _, err := tx.IndexEntry(to, entry)
		if err != nil {
			return err
		}
		if n > cur {
			if err := tx.SetIndexEntry(to, entry, n); err != nil {
				return err
			}
		}
	}
	return tx.DeleteCluster(record)
}
