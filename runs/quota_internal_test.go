package runs

import (
	"context"
	"testing"

	"github.com/oecp/oecp/store"
)

// TestUnfinishedCountStartsFromTheIndex: a tenant whose runs were
// admitted before the per-tenant count existed is counted from the
// unfinished-run index, and admissions and finishes keep the count from
// then on.
func TestUnfinishedCountStartsFromTheIndex(t *testing.T) {
	st, ctx := store.NewMemory(), context.Background()
	count := func(tk string) (n int) {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) (err error) { n, err = unfinishedOf(tx, tk); return err }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	err := st.Update(ctx, func(tx store.Tx) error {
		for _, e := range []string{activeEntry("n:a", "1"), activeEntry("n:a", "2"), activeEntry("n:b", "1"), activeEntry("n:aa", "1")} {
			if err := tx.SetIndexEntry(activeKey, e, 1); err != nil { // no count
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
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.SetIndexEntry(activeKey, activeEntry("n:a", "1"), 0) }); err != nil {
		t.Fatal(err)
	}
	if a := count("n:a"); a != 3 {
		t.Fatalf("a kept count reads %d, want the 3 recorded", a)
	}
}
