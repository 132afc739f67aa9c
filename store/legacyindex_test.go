package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/oecp/oecp/store"
)

func mustUpdate(t *testing.T, s store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// TestMoveLegacyIndexes: the entries of legacy records move into their
// index, an entry in several keeps its largest number, the records are
// deleted, and a record that is not an index is an error that moves
// nothing of it.
func TestMoveLegacyIndexes(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemory()
	mustUpdate(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.PutCluster("ix.3", store.Cluster{Version: 1, Data: []byte(`{"a":5,"b\u0000x":2}`)}),
			tx.PutCluster("ix~1.31", store.Cluster{Version: 1, Data: []byte(`{"a":4,"c":9}`)}),
			tx.PutCluster("ix~2.0", store.Cluster{Version: 1, Data: []byte(`{"c":11}`)}),
			tx.SetIndexEntry("ix", "b\x00x", 7))
	})
	moves := []store.LegacyIndex{{From: "ix", To: "ix"}, {From: "ix~1", To: "ix"}, {From: "ix~2", To: "ix"}}
	if err := store.MoveLegacyIndexes(ctx, s, moves); err != nil {
		t.Fatal(err)
	}
	err := s.View(ctx, func(tx store.ReadTx) error {
		got, err := tx.IndexEntries("ix")
		if err != nil {
			return err
		}
		if want := []store.Indexed{{Entry: "a", N: 5}, {Entry: "b\x00x", N: 7}, {Entry: "c", N: 11}}; !slices.Equal(got, want) {
			t.Errorf("moved index %+v, want %+v", got, want)
		}
		for _, r := range []string{"ix.3", "ix~1.31", "ix~2.0"} {
			if _, ok, err := tx.Cluster(r); err != nil || ok {
				t.Errorf("record %q left: %v %v", r, ok, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, func(tx store.Tx) error { return tx.PutCluster("bad.0", store.Cluster{Version: 1, Data: []byte(`[1]`)}) })
	if err := store.MoveLegacyIndexes(ctx, s, []store.LegacyIndex{{From: "bad", To: "bad"}}); err == nil {
		t.Fatal("a record that is no index moved")
	}
}

// TestUpgradeOnce: an upgrade runs until it succeeds once and never
// after, and a store with no event yet is recorded upgraded without it.
func TestUpgradeOnce(t *testing.T) {
	ctx := context.Background()
	calls := 0
	boom := errors.New("boom")
	fail := func(context.Context) error { calls++; return boom }
	count := func(context.Context) error { calls++; return nil }
	fresh := store.NewMemory()
	if err := store.UpgradeOnce(ctx, fresh, "\x00done", fail); err != nil || calls != 0 {
		t.Fatalf("fresh store: %v after %d calls", err, calls)
	}
	if err := store.UpgradeOnce(ctx, fresh, "\x00done", fail); err != nil || calls != 0 {
		t.Fatalf("fresh store again: %v after %d calls", err, calls)
	}
	used := store.NewMemory()
	mustUpdate(t, used, func(tx store.Tx) error {
		if err := tx.CreateRun("t", store.Run{ID: "r"}); err != nil {
			return err
		}
		_, err := tx.AppendEvent("t", "r", func(uint64) ([]byte, error) { return []byte("{}"), nil })
		return err
	})
	if err := store.UpgradeOnce(ctx, used, "\x00done", fail); !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("failing upgrade: %v after %d calls", err, calls)
	}
	for range 2 {
		if err := store.UpgradeOnce(ctx, used, "\x00done", count); err != nil || calls != 2 {
			t.Fatalf("upgrade: %v after %d calls", err, calls)
		}
	}
}
