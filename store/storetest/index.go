package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/oecp/oecp/store"
)

// The index operations of the store port (store.ReadTx.IndexEntry,
// IndexEntries, IndexBelow and store.Tx.SetIndexEntry).

// indexed reads the whole index key in a View.
func indexed(t *testing.T, s store.Store, key string) []store.Indexed {
	t.Helper()
	var out []store.Indexed
	must(t, s.View(ctx, func(tx store.ReadTx) (err error) { out, err = tx.IndexEntries(key); return err }))
	return out
}

func setIndex(t *testing.T, s store.Store, key string, entries ...store.Indexed) {
	t.Helper()
	must(t, s.Update(ctx, func(tx store.Tx) error {
		for _, e := range entries {
			if err := tx.SetIndexEntry(key, e.Entry, e.N); err != nil {
				return err
			}
		}
		return nil
	}))
}

func ie(entry string, n uint64) store.Indexed { return store.Indexed{Entry: entry, N: n} }

func sameIndexed(t *testing.T, what string, got, want []store.Indexed) {
	t.Helper()
	if !slices.Equal(got, want) && (len(got) != 0 || len(want) != 0) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// testIndexEntries: entries are set, replaced and removed; a whole read is
// ordered by number, then by entry bytes; entries of any bytes (NUL,
// invalid UTF-8) keep them; indexes whose keys share a prefix stay apart;
// a removal of an absent entry is no error; a write wakes watchers.
func testIndexEntries(t *testing.T, s store.Store) {
	odd := "n:\"a\"\x00run\xff"
	setIndex(t, s, "ix", ie("b", 5), ie("a", 5), ie(odd, 2), ie("c", 9), ie("gone", 1))
	setIndex(t, s, "ix\x00", ie("other", 1))
	setIndex(t, s, "i", ie("x", 3))
	ch := s.Changed()
	setIndex(t, s, "ix", ie("c", 1), ie("gone", 0), ie("never", 0))
	select {
	case <-ch:
	default:
		t.Fatal("an index write did not wake watchers")
	}
	sameIndexed(t, "ix", indexed(t, s, "ix"), []store.Indexed{ie("c", 1), ie(odd, 2), ie("a", 5), ie("b", 5)})
	sameIndexed(t, "ix NUL", indexed(t, s, "ix\x00"), []store.Indexed{ie("other", 1)})
	sameIndexed(t, "absent index", indexed(t, s, "nothing"), nil)
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		for _, c := range []struct {
			entry string
			n     uint64
			ok    bool
		}{{odd, 2, true}, {"c", 1, true}, {"gone", 0, false}, {"x", 0, false}, {"other", 0, false}} {
			n, ok, err := tx.IndexEntry("ix", c.entry)
			if err != nil || n != c.n || ok != c.ok {
				return fmt.Errorf("IndexEntry(ix, %q) = %d, %v, %v; want %d, %v", c.entry, n, ok, err, c.n, c.ok)
			}
		}
		return nil
	}))
}

// testIndexBelow: IndexBelow returns the entries below a number, smallest
// first, at most limit of them; the largest number an index holds is
// MaxIndexNumber, and a larger one is refused without a trace.
func testIndexBelow(t *testing.T, s store.Store) {
	var all []store.Indexed
	for i := range 20 {
		all = append(all, store.Indexed{Entry: fmt.Sprintf("e%02d", 19-i), N: uint64(100 + i/2)})
	}
	top := store.Indexed{Entry: "top", N: store.MaxIndexNumber}
	setIndex(t, s, "ix", append(slices.Clone(all), top)...)
	want := slices.Clone(all)
	slices.SortFunc(want, func(a, b store.Indexed) int { return cmp.Or(cmp.Compare(a.N, b.N), cmp.Compare(a.Entry, b.Entry)) })
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		for _, c := range []struct {
			below uint64
			limit int
			want  []store.Indexed
		}{
			{105, 100, want[:10]}, {105, 3, want[:3]}, {100, 100, nil}, {0, 100, nil}, {200, 0, nil},
			{store.MaxIndexNumber, 100, want}, {store.MaxIndexNumber + 1, 100, append(slices.Clone(want), top)},
			{^uint64(0), 100, append(slices.Clone(want), top)},
		} {
			got, err := tx.IndexBelow("ix", c.below, c.limit)
			if err != nil {
				return err
			}
			sameIndexed(t, fmt.Sprintf("IndexBelow(%d, %d)", c.below, c.limit), got, c.want)
		}
		return nil
	}))
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.SetIndexEntry("ix", "first", 1); err != nil {
			return err
		}
		return tx.SetIndexEntry("ix", "huge", store.MaxIndexNumber+1)
	})
	if !errors.Is(err, store.ErrIndexNumber) {
		t.Fatalf("a number above MaxIndexNumber: %v", err)
	}
	sameIndexed(t, "after the refused write", indexed(t, s, "ix"), append(want, top))
}

// testIndexTransactions: a transaction reads its own index writes (by
// entry, whole and below a number); a rolled-back one leaves no trace; a
// View cannot write an index.
func testIndexTransactions(t *testing.T, s store.Store) {
	setIndex(t, s, "ix", ie("a", 1), ie("b", 2))
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx store.Tx) error {
		for _, e := range []store.Indexed{ie("a", 0), ie("c", 3), ie("b", 7)} {
			if err := tx.SetIndexEntry("ix", e.Entry, e.N); err != nil {
				return err
			}
		}
		if n, ok, err := tx.IndexEntry("ix", "a"); err != nil || ok || n != 0 {
			return fmt.Errorf("removed entry read back as %d, %v, %v", n, ok, err)
		}
		if n, ok, err := tx.IndexEntry("ix", "b"); err != nil || !ok || n != 7 {
			return fmt.Errorf("replaced entry read back as %d, %v, %v", n, ok, err)
		}
		all, err := tx.IndexEntries("ix")
		if err != nil {
			return err
		}
		sameIndexed(t, "whole index inside the transaction", all, []store.Indexed{ie("c", 3), ie("b", 7)})
		below, err := tx.IndexBelow("ix", 5, 10)
		if err != nil {
			return err
		}
		sameIndexed(t, "below 5 inside the transaction", below, []store.Indexed{ie("c", 3)})
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want the callback's error", err)
	}
	sameIndexed(t, "after a rollback", indexed(t, s, "ix"), []store.Indexed{ie("a", 1), ie("b", 2)})
	err = s.View(ctx, func(tx store.ReadTx) error {
		if w, ok := tx.(store.Tx); ok {
			return w.SetIndexEntry("ix", "a", 2)
		}
		return store.ErrReadOnly
	})
	if !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("index write through View: %v", err)
	}
}
