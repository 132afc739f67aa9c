package store

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
)

// Index is a set of entries with a number each (a sequence, a time),
// kept in IndexBuckets cluster records chosen by a hash of the entry, so
// that a write rewrites one small record rather than one that grows with
// every entry. Its records are named key + "." + bucket; key must not
// collide with a tenant key.
type Index map[string]uint64

// IndexBuckets is the number of records one index is spread over.
const IndexBuckets = 32

func indexBucket(key, entry string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(entry))
	return key + "." + strconv.Itoa(int(h.Sum32()%IndexBuckets))
}

func loadIndexBucket(tx ReadTx, key string, into Index) (uint64, error) {
	c, ok, err := tx.Cluster(key)
	if err != nil || !ok {
		return 0, err
	}
	if err := json.Unmarshal(c.Data, &into); err != nil {
		return 0, fmt.Errorf("store: corrupt index %q: %w", key, err)
	}
	return c.Version, nil
}

// LoadIndex reads every bucket of an index.
func LoadIndex(tx ReadTx, key string) (Index, error) {
	ix := Index{}
	for i := range IndexBuckets {
		if _, err := loadIndexBucket(tx, key+"."+strconv.Itoa(i), ix); err != nil {
			return nil, err
		}
	}
	return ix, nil
}

// UpdateIndex sets (n > 0) or deletes (n == 0) one entry.
func UpdateIndex(tx Tx, key, entry string, n uint64) error {
	bk := indexBucket(key, entry)
	ix := Index{}
	version, err := loadIndexBucket(tx, bk, ix)
	if err != nil {
		return err
	}
	if n == 0 {
		delete(ix, entry)
	} else {
		ix[entry] = n
	}
	data, err := json.Marshal(ix)
	if err == nil {
		err = tx.PutCluster(bk, Cluster{Version: version + 1, Data: data})
	}
	return err
}

// Ordered returns the index's entries by number, smallest first.
func (ix Index) Ordered() []string {
	keys := make([]string, 0, len(ix))
	for k := range ix {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(ix[a], ix[b]) })
	return keys
}
