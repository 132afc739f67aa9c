package runs

import (
	"context"
	"fmt"
	"testing"

	"github.com/oecp/oecp/store"
)

// TestWideIndexReadsAndDropsEntriesWrittenBeforeIt: an entry written to
// the unfinished-run index before it was wide (in the index's own key) is
// listed, a newer number for it wins, and dropping it drops it
// everywhere; new entries spread over the sub-indexes.
func TestWideIndexReadsAndDropsEntriesWrittenBeforeIt(t *testing.T) {
	st := store.NewMemory()
	entry := ""
	for i := 0; entry == ""; i++ {
		if e := activeEntry("n:t", fmt.Sprint("old-", i)); subOf(e) != 0 {
			entry = e
		}
	}
	mustUpdate(t, st, func(tx store.Tx) error { return store.UpdateIndex(tx, activeKey, entry, 5) }) // the narrow layout
	if got := listActive(t, st)[entry]; got != 5 {
		t.Fatalf("legacy entry listed as %d", got)
	}
	mustUpdate(t, st, func(tx store.Tx) error { return updateIndex(tx, activeKey, entry, 9) })
	if got := listActive(t, st)[entry]; got != 9 {
		t.Fatalf("updated entry listed as %d", got)
	}
	mustUpdate(t, st, func(tx store.Tx) error { return updateIndex(tx, activeKey, entry, 0) })
	if _, ok := listActive(t, st)[entry]; ok {
		t.Fatal("dropped entry still listed")
	}
	used := map[int]bool{}
	mustUpdate(t, st, func(tx store.Tx) error {
		for i := range 64 {
			e := activeEntry("n:t", fmt.Sprint("new-", i))
			used[subOf(e)] = true
			if err := updateIndex(tx, activeKey, e, uint64(i+1)); err != nil {
				return err
			}
		}
		return nil
	})
	if len(used) < 2 || len(listActive(t, st)) != 64 {
		t.Fatalf("64 entries over %d sub-indexes, %d listed", len(used), len(listActive(t, st)))
	}
}

// TestUnfinishedCountStartsFromTheIndex: a tenant whose runs were
// admitted before the per-tenant count existed is counted from the
// unfinished-run index, and admissions and finishes keep the count from
// then on.
func TestUnfinishedCountStartsFromTheIndex(t *testing.T) {
	st := store.NewMemory()
	ctx := context.Background()
	count := func(tk string) (n int) {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) (err error) { n, err = unfinishedOf(tx, tk); return err }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	err := st.Update(ctx, func(tx store.Tx) error {
		for _, e := range []string{activeEntry("n:a", "1"), activeEntry("n:a", "2"), activeEntry("n:b", "1")} {
			if err := store.UpdateIndex(tx, activeKey, e, 1); err != nil { // the narrow layout, no count
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if a, b, c := count("n:a"), count("n:b"), count("n:c"); a != 2 || b != 1 || c != 0 {
		t.Fatalf("counted %d, %d, %d; want 2, 1, 0", a, b, c)
	}
	if err := st.Update(ctx, func(tx store.Tx) error { return setUnfinished(tx, "n:a", 3) }); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx store.Tx) error { return updateIndex(tx, activeKey, activeEntry("n:a", "1"), 0) }); err != nil {
		t.Fatal(err)
	}
	if a := count("n:a"); a != 3 {
		t.Fatalf("a kept count reads %d, want the 3 recorded", a)
	}
}

// TestWideIndexReadsAndDropsEntriesOfTheEarlierFanout: an entry written
// where the earlier, smaller fanout put it (a sub-index its own no longer
// is) is listed, and dropping it drops it there too.
func TestWideIndexReadsAndDropsEntriesOfTheEarlierFanout(t *testing.T) {
	st := store.NewMemory()
	ctx := context.Background()
	entry := ""
	for i := 0; entry == ""; i++ {
		e := activeEntry("n:t", fmt.Sprint("old-", i))
		if j := subOf(e) % earlierFanout; j != subOf(e) && j != 0 {
			entry = e
		}
	}
	earlier := subKey(activeKey, subOf(entry)%earlierFanout)
	mustUpdate(t, st, func(tx store.Tx) error { return store.UpdateIndex(tx, earlier, entry, 5) }) // the earlier layout
	if got := listActive(t, st)[entry]; got != 5 {
		t.Fatalf("entry of the earlier fanout listed as %d", got)
	}
	mustUpdate(t, st, func(tx store.Tx) error { return updateIndex(tx, activeKey, entry, 0) })
	if _, ok := listActive(t, st)[entry]; ok {
		t.Fatal("dropped entry still listed")
	}
	var left runIndex
	if err := st.View(ctx, func(tx store.ReadTx) (err error) { left, err = store.LoadIndex(tx, earlier); return err }); err != nil {
		t.Fatal(err)
	}
	if _, ok := left[entry]; ok {
		t.Fatal("dropped entry still in the earlier sub-index")
	}
}

// TestWideLayoutMemory: a backend's group commits look for an entry in
// the places of earlier layouts only while the index holds entries there;
// what it learnt comes from committed data, never from a batch's buffered
// drops, and once the last such entry is gone drops stop looking.
func TestWideLayoutMemory(t *testing.T) {
	st := store.NewMemory()
	legacy := ""
	for i := 0; legacy == ""; i++ {
		if e := activeEntry("n:t", fmt.Sprint("old-", i)); subOf(e) != 0 {
			legacy = e
		}
	}
	var layout wideLayout
	batch := func(fn func(w *batchTx) error) {
		t.Helper()
		mustUpdate(t, st, func(tx store.Tx) error {
			w := &batchTx{Tx: tx, layout: &layout}
			if err := fn(w); err != nil {
				return err
			}
			return w.ix.Flush(tx)
		})
	}
	// An entry of the narrow layout.
	mustUpdate(t, st, func(tx store.Tx) error { return store.UpdateIndex(tx, activeKey, legacy, 5) })
	// A batch whose drop of the old entry is still buffered does not
	// count it gone.
	batch(func(w *batchTx) error {
		if err := updateIndex(w, activeKey, legacy, 0); err != nil {
			return err
		}
		layout.wait[activeKey] = 0 // look at it again now
		clean, err := layout.placed(w, activeKey)
		if clean {
			t.Error("index counted free of earlier layouts while the drop was only buffered")
		}
		return err
	})
	if _, ok := listActive(t, st)[legacy]; ok {
		t.Fatal("an entry of the narrow layout survived its drop in a group commit")
	}
	// Looked at again once recheckDrops drops have passed: now it is free.
	layout.wait[activeKey] = 0
	batch(func(w *batchTx) error {
		clean, err := layout.placed(w, activeKey)
		if !clean {
			t.Error("index still counted as holding entries of earlier layouts")
		}
		return err
	})
	// From then on a drop looks only where the fanout puts the entry.
	mustUpdate(t, st, func(tx store.Tx) error { return store.UpdateIndex(tx, activeKey, legacy, 7) })
	batch(func(w *batchTx) error { return updateIndex(w, activeKey, legacy, 0) })
	if got := listActive(t, st)[legacy]; got != 7 {
		t.Fatalf("entry planted in the narrow layout afterwards reads %d; want it left alone (7)", got)
	}
}

// mustUpdate runs fn in one write transaction of st.
func mustUpdate(t *testing.T, st store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := st.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// listActive reads the whole unfinished-run index of st.
func listActive(t *testing.T, st store.Store) runIndex {
	t.Helper()
	var ix runIndex
	if err := st.View(context.Background(), func(tx store.ReadTx) (err error) { ix, err = loadIndex(tx, activeKey); return err }); err != nil {
		t.Fatal(err)
	}
	return ix
}
