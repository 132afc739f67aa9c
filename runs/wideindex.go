package runs

import (
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/oecp/oecp/store"
)

// Wide indexes. The unfinished-run, finished-run and tenant run indexes
// gain an entry per run and are rewritten by commits of the run, and a
// write rewrites the whole bucket its entry hashes to. With a store
// index's fixed number of buckets a bucket grows with the queue, so each
// commit would cost more the more runs wait. A wide index is wideFanout
// store indexes, an entry kept in the one a second hash picks, so a
// bucket holds wideFanout times fewer entries. Sub-index 0 has the
// index's own key, so an index written before it was wide reads as its
// sub-index 0: an entry found there and in its own sub-index counts with
// its larger number, and dropping an entry drops it from sub-index 0 too.
// Readers of the whole index read every sub-index.

// wideFanout is the number of store indexes one wide index spreads over
// (each of store.IndexBuckets buckets).
const wideFanout = 8

// isWide reports whether the index named key is kept wide: the
// unfinished and finished runs, and each tenant's runs (rewritten by every
// admission).
func isWide(key string) bool {
	return key == activeKey || key == finishedKey || strings.HasSuffix(key, indexSuffix)
}

// subKey is the key of sub-index i of key.
func subKey(key string, i int) string {
	if i == 0 {
		return key
	}
	return key + "~" + strconv.Itoa(i)
}

// subOf is the sub-index of entry: bits of its hash that the store's
// bucket choice does not use.
func subOf(entry string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(entry))
	return int(h.Sum32()>>16) % wideFanout
}

// loadWide reads every sub-index of a wide index.
func loadWide(tx store.ReadTx, key string, load func(store.ReadTx, string) (runIndex, error)) (runIndex, error) {
	out := runIndex{}
	for i := range wideFanout {
		ix, err := load(tx, subKey(key, i))
		if err != nil {
			return nil, err
		}
		for e, n := range ix {
			out[e] = max(out[e], n)
		}
	}
	return out, nil
}

// updateWide sets (seq > 0) or deletes (seq == 0) one entry of a wide
// index.
func updateWide(tx store.Tx, key, entry string, seq uint64) error {
	i := subOf(entry)
	if err := updateNarrow(tx, subKey(key, i), entry, seq); err != nil {
		return err
	}
	if seq != 0 || i == 0 {
		return nil
	}
	// An entry written before the index was wide is in sub-index 0.
	w := &store.IndexWrites{}
	if b, ok := tx.(*batchTx); ok {
		w = &b.ix
	}
	n, err := w.Lookup(tx, key, entry)
	if err != nil || n == 0 {
		return err
	}
	return updateNarrow(tx, key, entry, 0)
}
