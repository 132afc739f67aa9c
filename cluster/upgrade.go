package cluster

import (
	"context"

	"github.com/oecp/oecp/store"
)

// upgradedKey is the cluster record that says the ended-run index was
// moved; no tenant key equals it.
const upgradedKey = "\x00ended-runs-moved"

// Upgrade moves the ended-run index an earlier release kept in cluster
// records (store.LegacyIndex) into the store's indexes, once per store;
// call it before the backend serves.
func (b *Backend) Upgrade(ctx context.Context) error {
	return store.UpgradeOnce(ctx, b.store, upgradedKey, func(ctx context.Context) error {
		return store.MoveLegacyIndexes(ctx, b.store, []store.LegacyIndex{{From: endedKey, To: endedKey}})
	})
}
