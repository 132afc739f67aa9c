package runs

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/oecp/oecp/store"
)

// WriteLegacyIndexes rewrites the run indexes of st in the layout of an
// earlier release and forgets that st was upgraded. Each index goes to
// 32 bucket records (key + "." + the entry's FNV-1a hash mod 32), as JSON;
// a wide index's entry goes to the sub-index the hash's upper half picks
// (key + "~" + i; key itself for 0), except every third, which stays in
// the index's own key (the layout before the indexes were wide), and
// every third after the first also leaves a smaller number in the
// sub-index the earlier fanout of 8 picked.
func WriteLegacyIndexes(ctx context.Context, st store.Store) error {
	return st.Update(ctx, func(tx store.Tx) error {
		records := map[string]map[string]uint64{}
		put := func(index, entry string, n uint64) {
			h := fnv.New32a()
			_, _ = h.Write([]byte(entry))
			name := index + "." + strconv.Itoa(int(h.Sum32()%32))
			if records[name] == nil {
				records[name] = map[string]uint64{}
			}
			records[name][entry] = n
		}
		keys := []string{activeKey, finishedKey, goneKey, unfinishedKey}
		seen := map[string]bool{}
		for i := 0; i < len(keys); i++ {
			key := keys[i]
			ix, err := tx.IndexEntries(key)
			if err != nil {
				return err
			}
			for j, e := range ix {
				if key == activeKey || key == finishedKey || key == goneKey {
					if tk, _ := splitActive(e.Entry); !seen[tk] {
						seen[tk] = true
						keys = append(keys, indexKey(tk))
					}
				}
				wide := key == activeKey || key == finishedKey || strings.HasSuffix(key, indexSuffix)
				h := fnv.New32a()
				_, _ = h.Write([]byte(e.Entry))
				sub := int(h.Sum32()>>16) % 32
				switch {
				case !wide || j%3 == 0 || sub == 0:
					put(key, e.Entry, e.N)
				default:
					put(key+"~"+strconv.Itoa(sub), e.Entry, e.N)
				}
				if wide && j%3 == 1 && sub%8 != sub && sub%8 != 0 {
					put(key+"~"+strconv.Itoa(sub%8), e.Entry, e.N-1)
				}
				if err := tx.SetIndexEntry(key, e.Entry, 0); err != nil {
					return err
				}
			}
		}
		for name, entries := range records {
			data, err := json.Marshal(entries)
			if err != nil {
				return err
			}
			if err := tx.PutCluster(name, store.Cluster{Version: 1, Data: data}); err != nil {
				return err
			}
		}
		return tx.DeleteCluster(upgradedKey)
	})
}

// LegacyRecords counts the records of the earlier layout left in st, for
// the tenant keys tks.
func LegacyRecords(ctx context.Context, st store.Store, tks ...string) (int, error) {
	moves := append(legacyWide(activeKey, finishedKey), legacyNarrow(goneKey, unfinishedKey)...)
	for _, tk := range tks {
		moves = append(moves, legacyWide(indexKey(tk))...)
	}
	n := 0
	err := st.View(ctx, func(tx store.ReadTx) error {
		for _, m := range moves {
			for i := range 32 {
				_, ok, err := tx.Cluster(m.From + "." + strconv.Itoa(i))
				if err != nil {
					return err
				}
				if ok {
					n++
				}
			}
		}
		return nil
	})
	return n, err
}
