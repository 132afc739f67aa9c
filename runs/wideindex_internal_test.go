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
	ctx := context.Background()
	entry := ""
	for i := 0; entry == ""; i++ {
		if e := activeEntry("n:t", fmt.Sprint("old-", i)); subOf(e) != 0 {
			entry = e
		}
	}
	update := func(fn func(tx store.Tx) error) {
		t.Helper()
		if err := st.Update(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	list := func() runIndex {
		t.Helper()
		var ix runIndex
		if err := st.View(ctx, func(tx store.ReadTx) (err error) { ix, err = loadIndex(tx, activeKey); return err }); err != nil {
			t.Fatal(err)
		}
		return ix
	}
	update(func(tx store.Tx) error { return store.UpdateIndex(tx, activeKey, entry, 5) }) // the narrow layout
	if got := list()[entry]; got != 5 {
		t.Fatalf("legacy entry listed as %d", got)
	}
	update(func(tx store.Tx) error { return updateIndex(tx, activeKey, entry, 9) })
	if got := list()[entry]; got != 9 {
		t.Fatalf("updated entry listed as %d", got)
	}
	update(func(tx store.Tx) error { return updateIndex(tx, activeKey, entry, 0) })
	if _, ok := list()[entry]; ok {
		t.Fatal("dropped entry still listed")
	}
	used := map[int]bool{}
	update(func(tx store.Tx) error {
		for i := range 64 {
			e := activeEntry("n:t", fmt.Sprint("new-", i))
			used[subOf(e)] = true
			if err := updateIndex(tx, activeKey, e, uint64(i+1)); err != nil {
				return err
			}
		}
		return nil
	})
	if len(used) < 2 || len(list()) != 64 {
		t.Fatalf("64 entries over %d sub-indexes, %d listed", len(used), len(list()))
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
	update := func(fn func(tx store.Tx) error) {
		t.Helper()
		if err := st.Update(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	list := func() runIndex {
		t.Helper()
		var ix runIndex
		if err := st.View(ctx, func(tx store.ReadTx) (err error) { ix, err = loadIndex(tx, activeKey); return err }); err != nil {
			t.Fatal(err)
		}
		return ix
	}
	update(func(tx store.Tx) error { return store.UpdateIndex(tx, earlier, entry, 5) }) // the earlier layout
	if got := list()[entry]; got != 5 {
		t.Fatalf("entry of the earlier fanout listed as %d", got)
	}
	update(func(tx store.Tx) error { return updateIndex(tx, activeKey, entry, 0) })
	if _, ok := list()[entry]; ok {
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
