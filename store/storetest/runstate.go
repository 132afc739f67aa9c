package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/oecp/oecp/store"
)

// stateIs checks the run's state record as a new read sees it: version 0
// means none.
func stateIs(t *testing.T, s store.Store, tenant, runID string, version uint64, data string) {
	t.Helper()
	must(t, s.View(ctx, func(tx store.ReadTx) error { return stateIn(tx, tenant, runID, version, data) }))
}

func stateIn(tx store.ReadTx, tenant, runID string, version uint64, data string) error {
	r, ok, err := tx.RunState(tenant, runID)
	switch {
	case err != nil:
		return err
	case version == 0 && ok:
		return fmt.Errorf("%s/%s has state version %d, want none", tenant, runID, r.Version)
	case version != 0 && (!ok || r.Version != version || string(r.Data) != data):
		return fmt.Errorf("state of %s/%s: version %d %q (found %v), want %d %q", tenant, runID, r.Version, r.Data, ok, version, data)
	}
	return nil
}

func putState(tenant, runID string, version uint64, data string) func(store.Tx) error {
	return func(tx store.Tx) error {
		return tx.PutRunState(tenant, runID, store.Record{Version: version, Data: []byte(data)})
	}
}

// testRunStates: a run's state is versioned as a cluster record is (1
// first, then one more each time; anything else is ErrVersionConflict and
// writes nothing), needs its run, is per tenant, and is read back in its
// own transaction and by later ones; a failed transaction keeps nothing.
func testRunStates(t *testing.T, s store.Store) {
	createRun(t, s, "a", "r1")
	createRun(t, s, "a", "r2")
	createRun(t, s, "b", "r1") // another tenant's run of the same id
	if err := s.Update(ctx, putState("a", "zz", 1, "x")); !errors.Is(err, store.ErrNoRun) {
		t.Fatalf("state of an unknown run: %v, want ErrNoRun", err)
	}
	stateIs(t, s, "a", "zz", 0, "")
	if err := s.Update(ctx, putState("a", "r1", 2, "x")); !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("first state at version 2: %v, want ErrVersionConflict", err)
	}
	stateIs(t, s, "a", "r1", 0, "")

	must(t, s.Update(ctx, func(tx store.Tx) error {
		buf := []byte("one")
		if err := tx.PutRunState("a", "r1", store.Record{Version: 1, Data: buf}); err != nil {
			return err
		}
		copy(buf, "XXX") // the store kept its own copy
		if err := stateIn(tx, "a", "r1", 1, "one"); err != nil {
			return fmt.Errorf("in its own transaction: %w", err)
		}
		if err := tx.PutRunState("a", "r1", store.Record{Version: 2, Data: []byte("two")}); err != nil {
			return fmt.Errorf("a second write in the transaction: %w", err)
		}
		return putState("b", "r1", 1, "")(tx)
	}))
	stateIs(t, s, "a", "r1", 2, "two")
	stateIs(t, s, "b", "r1", 1, "") // empty, but there
	stateIs(t, s, "a", "r2", 0, "")

	for _, v := range []uint64{1, 2, 4} {
		if err := s.Update(ctx, putState("a", "r1", v, "stale")); !errors.Is(err, store.ErrVersionConflict) {
			t.Fatalf("put at version %d over 2: %v, want ErrVersionConflict", v, err)
		}
	}
	stateIs(t, s, "a", "r1", 2, "two")
	must(t, s.Update(ctx, putState("a", "r1", 3, "three")))
	stateIs(t, s, "a", "r1", 3, "three")

	boom := errors.New("boom")
	if err := s.Update(ctx, func(tx store.Tx) error {
		return errors.Join(putState("a", "r1", 4, "four")(tx), putState("a", "r2", 1, "x")(tx), boom)
	}); !errors.Is(err, boom) {
		t.Fatalf("Update = %v", err)
	}
	stateIs(t, s, "a", "r1", 3, "three")
	stateIs(t, s, "a", "r2", 0, "")
}

// testDeleteRunState: Pruner.DeleteRun deletes the run's state and no
// other; a run created again under the id starts again at version 1.
func testDeleteRunState(t *testing.T, s store.Store) {
	for _, k := range [][2]string{{"a", "r1"}, {"a", "r2"}, {"b", "r1"}} {
		createRun(t, s, k[0], k[1])
		must(t, s.Update(ctx, putState(k[0], k[1], 1, k[0]+k[1])))
	}
	must(t, s.Update(ctx, func(p store.Tx) error { return p.DeleteRun("a", "r1") }))
	stateIs(t, s, "a", "r1", 0, "")
	stateIs(t, s, "a", "r2", 1, "ar2")
	stateIs(t, s, "b", "r1", 1, "br1")
	createRun(t, s, "a", "r1")
	stateIs(t, s, "a", "r1", 0, "")
	must(t, s.Update(ctx, putState("a", "r1", 1, "again")))
	stateIs(t, s, "a", "r1", 1, "again")
}
