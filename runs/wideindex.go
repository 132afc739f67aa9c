package runs

import (
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

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
// An index written with an earlier, smaller fanout keeps each entry in the
// sub-index that fanout picked (the same hash bits, fewer of them), which
// is read with the rest, and dropping an entry drops it there too.
// Readers of the whole index read every sub-index.

// wideFanout is the number of store indexes one wide index spreads over
// (each of store.IndexBuckets buckets): 1,024 buckets, so a commit
// rewrites a bucket of about 16 entries with 16,000 runs unfinished.
const wideFanout = 32

// earlierFanout is the fanout wide indexes were written with before
// wideFanout; it must divide wideFanout, so an entry's earlier sub-index is
// its sub-index modulo earlierFanout.
const earlierFanout = 8

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
	if b, ok := tx.(*batchTx); ok && b.layout != nil {
		placed, err := b.layout.placed(b.Tx, key)
		if err != nil || placed {
			return err
		}
	}
	// An entry written with the earlier fanout is in sub-index
	// i % earlierFanout; one written before the index was wide, in
	// sub-index 0.
	if j := i % earlierFanout; j != i && j != 0 {
		if err := dropLegacy(tx, subKey(key, j), entry); err != nil {
			return err
		}
	}
	return dropLegacy(tx, key, entry)
}

// dropLegacy deletes entry from the store index key if it is there.
func dropLegacy(tx store.Tx, key, entry string) error {
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

// wideLayout remembers, for one backend, the wide indexes found to hold
// every entry in the sub-index wideFanout picks for it: nothing written
// with the earlier fanout or before the index was wide is left there, so
// dropping an entry need not look for it in those places. Code of this
// version writes an entry only where wideFanout picks, so a key once found
// so stays so. A key that still holds entries of an earlier layout is
// looked at again after recheckDrops more drops, meanwhile every drop
// looks in the earlier places.
type wideLayout struct {
	mu    sync.Mutex
	clean map[string]bool
	wait  map[string]int // drops left before key is looked at again
}

// recheckDrops is how many drops of a key still holding entries of an
// earlier layout pass before it is read whole again.
const recheckDrops = 4096

// placed reports whether the wide index key holds no entry of an earlier
// layout. It reads tx's committed state, never a group commit's buffered
// updates: a drop buffered in a batch that does not commit must not count.
func (l *wideLayout) placed(tx store.ReadTx, key string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clean[key] {
		return true, nil
	}
	if l.wait[key] > 0 {
		l.wait[key]--
		return false, nil
	}
	// Entries of an earlier layout are in sub-indexes 0 to
	// earlierFanout-1, each where its own sub-index is another.
	for j := range earlierFanout {
		ix, err := store.LoadIndex(tx, subKey(key, j))
		if err != nil {
			return false, err
		}
		for e := range ix {
			if subOf(e) != j {
				if l.wait == nil {
					l.wait = map[string]int{}
				}
				l.wait[key] = recheckDrops
				return false, nil
			}
		}
	}
	if l.clean == nil {
		l.clean = map[string]bool{}
	}
	l.clean[key] = true
	return true, nil
}
