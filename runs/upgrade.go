package runs

import (
	"context"
	"strconv"

	"github.com/oecp/oecp/store"
)

// Indexes of earlier releases. An earlier release kept the run indexes in
// cluster records (store.LegacyIndex) and spread the unfinished-run, the
// finished-run and each tenant's run index over legacyFanout of them: key,
// key + "~1", ..., key + "~31"; an entry is in one of them, or in several
// with its larger number the one that counts. Upgrade moves them into the
// store's indexes once; nothing else reads that layout.

// legacyFanout is the number of legacy indexes an earlier release spread
// one wide index over.
const legacyFanout = 32

// upgradedKey is the cluster record that says the indexes were moved.
const upgradedKey = "\x00native-indexes-moved"

// Upgrade moves the run indexes an earlier release wrote into the store's
// indexes, once per store; call it before the backend serves. The
// tenants' run indexes are found through the tenants of the unfinished,
// finished and deleted runs.
func (b *Backend) Upgrade(ctx context.Context) error {
	return store.UpgradeOnce(ctx, b.store, upgradedKey, func(ctx context.Context) error {
		moves := append(legacyWide(activeKey, finishedKey), legacyNarrow(goneKey, unfinishedKey)...)
		if err := store.MoveLegacyIndexes(ctx, b.store, moves); err != nil {
			return err
		}
		tenants, err := legacyTenants(ctx, b.store)
		if err != nil {
			return err
		}
		return store.MoveLegacyIndexes(ctx, b.store, legacyWide(tenants...))
	})
}

// legacyWide is the legacy indexes each wide index key was spread over.
func legacyWide(keys ...string) []store.LegacyIndex {
	var out []store.LegacyIndex
	for _, key := range keys {
		out = append(out, store.LegacyIndex{From: key, To: key})
		for i := 1; i < legacyFanout; i++ {
			out = append(out, store.LegacyIndex{From: key + "~" + strconv.Itoa(i), To: key})
		}
	}
	return out
}

// legacyNarrow is the legacy index of each index key kept in one.
func legacyNarrow(keys ...string) []store.LegacyIndex {
	out := make([]store.LegacyIndex, len(keys))
	for i, key := range keys {
		out[i] = store.LegacyIndex{From: key, To: key}
	}
	return out
}

// legacyTenants is the run index key of every tenant with an unfinished,
// finished or deleted run.
func legacyTenants(ctx context.Context, s store.Store) ([]string, error) {
	seen := map[string]bool{}
	var keys []string
	err := s.View(ctx, func(tx store.ReadTx) error {
		for _, key := range []string{activeKey, finishedKey, goneKey} {
			ix, err := tx.IndexEntries(key)
			if err != nil {
				return err
			}
			for _, e := range ix {
				if tk, _ := splitActive(e.Entry); !seen[tk] {
					seen[tk] = true
					keys = append(keys, indexKey(tk))
				}
			}
		}
		return nil
	})
	return keys, err
}
