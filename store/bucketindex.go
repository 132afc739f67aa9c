package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
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
	if buckets.copyTo(key, c.Data, into) {
		return c.Version, nil
	}
	decoded := Index{}
	if err := json.Unmarshal(c.Data, &decoded); err != nil {
		return 0, fmt.Errorf("store: corrupt index %q: %w", key, err)
	}
	maps.Copy(into, decoded)
	buckets.put(key, slices.Clone(c.Data), decoded)
	return c.Version, nil
}

// bucketCache keeps the decoded form of index buckets by record name,
// with the exact bytes it was decoded from (or encoded to). A bucket is
// taken from it only when the record read holds those same bytes, so a
// write by any process, to any store, can never be answered from a stale
// entry: equal bytes decode alike. Entries are never handed out, only
// copied. It is bounded by dropping everything when full.
type bucketCache struct {
	mu sync.Mutex
	m  map[string]cachedBucket
}

type cachedBucket struct {
	data []byte
	ix   Index
}

// maxCachedBuckets bounds the decoded buckets kept in memory.
const maxCachedBuckets = 4096

var buckets bucketCache

// copyTo copies the cached bucket into `into` when data is the bytes it
// was cached with, and reports whether it did.
func (c *bucketCache) copyTo(key string, data []byte, into Index) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[key]
	if !ok || !bytes.Equal(b.data, data) {
		return false
	}
	maps.Copy(into, b.ix)
	return true
}

// put keeps ix as the decoding of data; the cache owns both from then on.
func (c *bucketCache) put(key string, data []byte, ix Index) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedBuckets {
		c.m = map[string]cachedBucket{}
	}
	c.m[key] = cachedBucket{data: data, ix: ix}
}

// LoadIndex reads every bucket of an index.
func LoadIndex(tx ReadTx, key string) (Index, error) {
	return (*IndexWrites)(nil).Load(tx, key)
}

// UpdateIndex sets (n > 0) or deletes (n == 0) one entry.
func UpdateIndex(tx Tx, key, entry string, n uint64) error {
	var w IndexWrites
	if err := w.Update(tx, key, entry, n); err != nil {
		return err
	}
	return w.Flush(tx)
}

// IndexWrites buffers the index updates of one write transaction: each
// bucket they touch is read and decoded once and, by Flush, encoded and
// written once, however many of its entries the transaction changes.
// Reads through Load see the buffered updates. The zero value is empty;
// a nil *IndexWrites buffers nothing (Load reads the store).
type IndexWrites struct {
	buckets map[string]*bufferedBucket
}

// bufferedBucket is one bucket as the transaction left it, and the
// version it was read at.
type bufferedBucket struct {
	ix      Index
	version uint64
	dirty   bool
}

func (w *IndexWrites) bucket(tx ReadTx, bk string) (*bufferedBucket, error) {
	if b, ok := w.buckets[bk]; ok {
		return b, nil
	}
	b := &bufferedBucket{ix: Index{}}
	version, err := loadIndexBucket(tx, bk, b.ix)
	if err != nil {
		return nil, err
	}
	b.version = version
	if w.buckets == nil {
		w.buckets = map[string]*bufferedBucket{}
	}
	w.buckets[bk] = b
	return b, nil
}

// Update sets (n > 0) or deletes (n == 0) one entry in the buffer.
func (w *IndexWrites) Update(tx ReadTx, key, entry string, n uint64) error {
	b, err := w.bucket(tx, indexBucket(key, entry))
	if err != nil {
		return err
	}
	if n == 0 {
		delete(b.ix, entry)
	} else {
		b.ix[entry] = n
	}
	b.dirty = true
	return nil
}

// Lookup returns entry's number (0: not in the index), reading only the
// bucket it hashes to, with the buffered updates.
func (w *IndexWrites) Lookup(tx ReadTx, key, entry string) (uint64, error) {
	b, err := w.bucket(tx, indexBucket(key, entry))
	if err != nil {
		return 0, err
	}
	return b.ix[entry], nil
}

// Load reads every bucket of an index, with the buffered updates.
func (w *IndexWrites) Load(tx ReadTx, key string) (Index, error) {
	ix := Index{}
	for i := range IndexBuckets {
		bk := key + "." + strconv.Itoa(i)
		if w != nil {
			if b, ok := w.buckets[bk]; ok {
				maps.Copy(ix, b.ix)
				continue
			}
		}
		if _, err := loadIndexBucket(tx, bk, ix); err != nil {
			return nil, err
		}
	}
	return ix, nil
}

// Flush writes every bucket an update changed, once, in name order, and
// empties the buffer.
func (w *IndexWrites) Flush(tx Tx) error {
	names := slices.Sorted(maps.Keys(w.buckets))
	for _, bk := range names {
		b := w.buckets[bk]
		if !b.dirty {
			continue
		}
		data, err := b.ix.encode()
		if err != nil {
			return err
		}
		if err := tx.PutCluster(bk, Cluster{Version: b.version + 1, Data: data}); err != nil {
			return err
		}
		// Should the transaction not commit, the record keeps other
		// bytes and the entry is never used. An entry that is not valid
		// UTF-8 does not decode to itself, so such a bucket is left to
		// the next load to decode.
		if validEntries(b.ix) {
			buckets.put(bk, slices.Clone(data), maps.Clone(b.ix))
		}
	}
	w.buckets = nil
	return nil
}

func validEntries(ix Index) bool {
	for entry := range ix {
		if !utf8.ValidString(entry) {
			return false
		}
	}
	return true
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

// encode is json.Marshal(ix), byte for byte: the entries in key order,
// each key a JSON string with encoding/json's escapes. Keys of plain
// ASCII (NUL included) are written here; any other key is written by
// encoding/json itself.
func (ix Index) encode() ([]byte, error) {
	keys := slices.Sorted(maps.Keys(ix))
	out := make([]byte, 0, 2+len(keys)*32)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		if plainKey(k) {
			out = append(out, '"')
			for j := 0; j < len(k); j++ {
				switch c := k[j]; c {
				case 0:
					out = append(out, `\u0000`...)
				case '"', '\\':
					out = append(out, '\\', c)
				default:
					out = append(out, c)
				}
			}
			out = append(out, '"')
		} else {
			q, err := json.Marshal(k)
			if err != nil {
				return nil, err
			}
			out = append(out, q...)
		}
		out = append(out, ':')
		out = strconv.AppendUint(out, ix[k], 10)
	}
	return append(out, '}'), nil
}

// plainKey reports whether k is printable ASCII and NUL only, without
// the characters encoding/json escapes for HTML.
func plainKey(k string) bool {
	for j := 0; j < len(k); j++ {
		c := k[j]
		if (c < 0x20 && c != 0) || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
