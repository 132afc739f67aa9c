package store_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/oecp/oecp/store"
)

// TestIndexWritesWriteEachBucketOnce: updates buffered in one transaction
// are seen by reads through the buffer, and Flush writes each bucket they
// touched once (its version moves by one however many of its entries
// changed); the committed index is the same as with one UpdateIndex per
// entry.
func TestIndexWritesWriteEachBucketOnce(t *testing.T) {
	ctx := context.Background()
	buffered, direct := store.NewMemory(), store.NewMemory()
	want := store.Index{}
	err := buffered.Update(ctx, func(tx store.Tx) error {
		var w store.IndexWrites
		for i := range 200 {
			entry := fmt.Sprintf("run-%d", i)
			want[entry] = uint64(i + 1)
			if err := w.Update(tx, "ix", entry, uint64(i+1)); err != nil {
				return err
			}
		}
		if err := w.Update(tx, "ix", "run-7", 0); err != nil {
			return err
		}
		delete(want, "run-7")
		seen, err := w.Load(tx, "ix")
		if err != nil {
			return err
		}
		if !maps.Equal(seen, want) {
			t.Errorf("buffered read: %d entries, want %d", len(seen), len(want))
		}
		return w.Flush(tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	for entry, n := range want {
		if err := direct.Update(ctx, func(tx store.Tx) error { return store.UpdateIndex(tx, "ix", entry, n) }); err != nil {
			t.Fatal(err)
		}
	}
	err = buffered.View(ctx, func(tx store.ReadTx) error {
		got, err := store.LoadIndex(tx, "ix")
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			t.Errorf("committed: %d entries, want %d", len(got), len(want))
		}
		for i := range store.IndexBuckets {
			c, ok, err := tx.Cluster(fmt.Sprintf("ix.%d", i))
			if err != nil || !ok || c.Version != 1 {
				t.Errorf("bucket %d: version %d (%v, %v), want 1", i, c.Version, ok, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = direct.View(ctx, func(tx store.ReadTx) error {
		got, err := store.LoadIndex(tx, "ix")
		if err == nil && !maps.Equal(got, want) {
			t.Errorf("one update per entry: %d entries, want %d", len(got), len(want))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
