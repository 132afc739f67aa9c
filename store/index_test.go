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

// TestLoadIndexSeesEveryWrite: a bucket decoded once is not reused after
// the record changed behind the index code's back (another process's
// write), after a flush whose transaction rolled back, or after the
// caller changed the index it was handed.
func TestLoadIndexSeesEveryWrite(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemory()
	load := func() store.Index { return loadIndex(t, s, "cache-ix") }
	if err := s.Update(ctx, func(tx store.Tx) error { return store.UpdateIndex(tx, "cache-ix", "a", 1) }); err != nil {
		t.Fatal(err)
	}
	first := load()
	first["a"] = 99 // the caller's copy
	if got := load(); !maps.Equal(got, store.Index{"a": 1}) {
		t.Fatalf("after the caller changed its copy: %v", got)
	}
	// Another writer replaces every bucket with one entry of its own.
	if err := s.Update(ctx, func(tx store.Tx) error {
		for i := range store.IndexBuckets {
			data := []byte("{}")
			if i == 0 {
				data = []byte(`{"b":7}`)
			}
			name := fmt.Sprintf("cache-ix.%d", i)
			c, _, err := tx.Cluster(name)
			if err != nil {
				return err
			}
			if err := tx.PutCluster(name, store.Cluster{Version: c.Version + 1, Data: data}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := load(); !maps.Equal(got, store.Index{"b": 7}) {
		t.Fatalf("after another writer: %v", got)
	}
	// A flush whose transaction rolls back leaves the committed index.
	errRollback := fmt.Errorf("rollback")
	err := s.Update(ctx, func(tx store.Tx) error {
		var w store.IndexWrites
		if err := w.Update(tx, "cache-ix", "b", 8); err != nil {
			return err
		}
		if err := w.Flush(tx); err != nil {
			return err
		}
		return errRollback
	})
	if err != errRollback {
		t.Fatalf("rollback: %v", err)
	}
	if got := load(); !maps.Equal(got, store.Index{"b": 7}) {
		t.Fatalf("after a rolled-back flush: %v", got)
	}
}

// TestIndexEntryNotUTF8: an entry that is not valid UTF-8 is read back
// as the store's JSON decoding has it, whether or not its bucket was just
// written by this process.
func TestIndexEntryNotUTF8(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemory()
	if err := s.Update(ctx, func(tx store.Tx) error { return store.UpdateIndex(tx, "utf8-ix", "a\xffb", 1) }); err != nil {
		t.Fatal(err)
	}
	if got := loadIndex(t, s, "utf8-ix"); !maps.Equal(got, store.Index{"a\ufffdb": 1}) {
		t.Fatalf("got %v", got)
	}
}

// loadIndex reads an index in a view of s.
func loadIndex(t *testing.T, s store.Store, key string) store.Index {
	t.Helper()
	var ix store.Index
	if err := s.View(context.Background(), func(tx store.ReadTx) error {
		var err error
		ix, err = store.LoadIndex(tx, key)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ix
}
