package cluster_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// TestUpgradeMovesTheEndedRunIndex: a superseded run entered in the
// ended-run index as an earlier release kept it (a bucket record) is
// compacted once the backend upgraded the store, and not before.
func TestUpgradeMovesTheEndedRunIndex(t *testing.T) {
	st, b, l, ref := logRig(t)
	ctx := context.Background()
	if err := l.Finish(ctx, ref, reduce.Terminal{Status: reduce.TerminalFailed, Reason: "done"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Resubmit(ctxFor("a"), protocol.ResubmitParams{IfGeneration: 1, IfRunID: ref.RunID, IdempotencyKey: "k2"}); err != nil {
		t.Fatal(err)
	}
	err := st.Update(ctx, func(tx store.Tx) error {
		ended, err := tx.IndexEntries(cluster.EndedKey)
		if err != nil || len(ended) != 1 {
			t.Fatalf("ended runs %v, %v; want the superseded one", ended, err)
		}
		data, err := json.Marshal(map[string]uint64{ended[0].Entry: ended[0].N})
		if err != nil {
			return err
		}
		if err := tx.PutCluster(cluster.EndedKey+".17", store.Cluster{Version: 1, Data: data}); err != nil {
			return err
		}
		if err := tx.SetIndexEntry(cluster.EndedKey, ended[0].Entry, 0); err != nil {
			return err
		}
		return tx.DeleteCluster(cluster.UpgradedKey)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.Compact(ctx, time.Now().Add(time.Hour), 10); err != nil || n != 0 {
		t.Fatalf("Compact before the upgrade = %d, %v; want nothing", n, err)
	}
	if err := b.Upgrade(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Compact(ctx, time.Now().Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("Compact after the upgrade = %d, %v; want the superseded run", n, err)
	}
	if err := st.View(ctx, func(tx store.ReadTx) error {
		if _, ok, err := tx.Cluster(cluster.EndedKey + ".17"); err != nil || ok {
			t.Fatalf("legacy record left: %v, %v", ok, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
