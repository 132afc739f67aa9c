package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/oecp/oecp/store"
)

func testDeleteRun(t *testing.T, s store.Store) {
	createRun(t, s, "b", "r1") // another tenant's run of the same id
	appendN(t, s, "b", "r1", 1)
	createRun(t, s, "a", "r2")
	kept := appendN(t, s, "a", "r2", 2)
	createRun(t, s, "a", "r1")
	gone := appendN(t, s, "a", "r1", 3) // holds the highest sequence
	ch := s.Changed()
	must(t, s.Update(ctx, func(p store.Tx) error { return p.DeleteRun("a", "r1") }))
	select {
	case <-ch:
	default:
		t.Fatal("a commit that only deleted did not close Changed")
	}
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		if _, ok, _ := tx.Run("a", "r1"); ok {
			return errors.New("deleted run still found")
		}
		if evs, _ := tx.Events("a", "r1", 0, 10); len(evs) != 0 {
			return fmt.Errorf("deleted run still has %d events", len(evs))
		}
		if _, ok, _ := tx.Event("a", gone[1].Seq); ok {
			return errors.New("deleted event still readable")
		}
		if r, ok, _ := tx.FirstRunAfter("a", kept[1].Seq); ok {
			return fmt.Errorf("FirstRunAfter found deleted run %+v", r)
		}
		if last, _ := tx.LastSeq(); last != gone[2].Seq {
			return fmt.Errorf("LastSeq %d after deleting, want %d", last, gone[2].Seq)
		}
		if evs, _ := tx.Events("a", "r2", 0, 10); len(evs) != 2 {
			return fmt.Errorf("another run lost events: %d", len(evs))
		}
		if evs, _ := tx.Events("b", "r1", 0, 10); len(evs) != 1 {
			return fmt.Errorf("another tenant's run lost events: %d", len(evs))
		}
		return nil
	}))
	// The id may be used again; sequences are never reused.
	createRun(t, s, "a", "r1")
	if again := appendN(t, s, "a", "r1", 1); again[0].Seq <= gone[2].Seq || again[0].Index != 1 {
		t.Fatalf("event of the recreated run %+v", again[0])
	}
	if err := s.Update(ctx, func(p store.Tx) error { return p.DeleteRun("a", "zz") }); !errors.Is(err, store.ErrNoRun) {
		t.Fatalf("delete unknown run: %v", err)
	}
}

func testDeleteRecords(t *testing.T, s store.Store) {
	must(t, s.Update(ctx, func(tx store.Tx) error {
		for v := uint64(1); v <= 2; v++ {
			if err := tx.PutCluster("k", store.Cluster{Version: v, Data: []byte("x")}); err != nil {
				return err
			}
		}
		return errors.Join(tx.PutIdempotency("a", "key", store.Receipt{Fingerprint: "f"}), tx.PutIdempotency("b", "key", store.Receipt{Fingerprint: "g"}))
	}))
	lease := store.RunLease("a", "r")
	if _, err := s.AcquireLease(ctx, lease, "owner"); err != nil {
		t.Fatal(err)
	}
	must(t, s.Update(ctx, func(p store.Tx) error {
		return errors.Join(p.DeleteCluster("k"), p.DeleteIdempotency("a", "key"), p.DeleteCluster("absent"), p.DeleteIdempotency("a", "absent"),
			p.DeleteLease(lease), p.DeleteLease("absent"))
	}))
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		if _, ok, _ := tx.Cluster("k"); ok {
			return errors.New("deleted cluster record still found")
		}
		if _, ok, _ := tx.Idempotency("a", "key"); ok {
			return errors.New("deleted receipt still found")
		}
		if _, ok, _ := tx.Idempotency("b", "key"); !ok {
			return errors.New("another tenant's receipt was deleted")
		}
		if l, found, _ := tx.Lease(lease); found {
			return fmt.Errorf("deleted lease still found: %+v", l)
		}
		return nil
	}))
	must(t, s.Update(ctx, func(tx store.Tx) error {
		return errors.Join(tx.PutCluster("k", store.Cluster{Version: 1}), tx.PutIdempotency("a", "key", store.Receipt{Fingerprint: "h"}))
	}))
}

func testDeleteRollback(t *testing.T, s store.Store) {
	createRun(t, s, "a", "r")
	appendN(t, s, "a", "r", 2)
	boom := errors.New("boom")
	if err := s.Update(ctx, func(p store.Tx) error {
		if err := p.DeleteRun("a", "r"); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Update = %v", err)
	}
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		if evs, _ := tx.Events("a", "r", 0, 10); len(evs) != 2 {
			return fmt.Errorf("a rolled-back delete removed events: %d left", len(evs))
		}
		return nil
	}))
}

// testDeletedInItsTransaction: after DeleteRun, the rest of its
// transaction sees none of the run (its record, events, checkpoint,
// state) and cannot write to it (ErrNoRun); the run's other tenant twin is
// untouched.
func testDeletedInItsTransaction(t *testing.T, s store.Store) {
	createRun(t, s, "a", "r1")
	evs := appendN(t, s, "a", "r1", 2)
	createRun(t, s, "b", "r1")
	must(t, s.Update(ctx, func(tx store.Tx) error {
		return errors.Join(tx.PutCheckpoint("a", "r1", []byte("cp")), tx.PutRunState("a", "r1", store.Record{Version: 1, Data: []byte("st")}))
	}))
	createRun(t, s, "a", "r2")
	must(t, s.Update(ctx, func(tx store.Tx) error {
		// Read first, so that a store caching what it read must forget it.
		if _, ok, err := tx.RunState("a", "r1"); !ok || err != nil {
			return fmt.Errorf("RunState before DeleteRun: found %v, %v", ok, err)
		}
		if _, ok, err := tx.Run("a", "r1"); !ok || err != nil {
			return fmt.Errorf("Run before DeleteRun: found %v, %v", ok, err)
		}
		added, err := tx.AppendEvent("a", "r2", func(uint64) ([]byte, error) { return []byte("{}"), nil })
		if err != nil {
			return err
		}
		if err := errors.Join(tx.DeleteRun("a", "r1"), tx.DeleteRun("a", "r2")); err != nil {
			return err
		}
		if _, ok, err := tx.Event("a", added.Seq); ok || err != nil {
			return fmt.Errorf("an event appended, then its run deleted, in one transaction: found %v, %v", ok, err)
		}
		if _, ok, err := tx.Run("a", "r1"); ok || err != nil {
			return fmt.Errorf("Run after DeleteRun: found %v, %v", ok, err)
		}
		if got, err := tx.Events("a", "r1", 0, 10); len(got) != 0 || err != nil {
			return fmt.Errorf("Events after DeleteRun: %d, %v", len(got), err)
		}
		if _, ok, err := tx.Event("a", evs[0].Seq); ok || err != nil {
			return fmt.Errorf("Event after DeleteRun: found %v, %v", ok, err)
		}
		if _, ok, err := tx.Checkpoint("a", "r1"); ok || err != nil {
			return fmt.Errorf("Checkpoint after DeleteRun: found %v, %v", ok, err)
		}
		if _, ok, err := tx.RunState("a", "r1"); ok || err != nil {
			return fmt.Errorf("RunState after DeleteRun: found %v, %v", ok, err)
		}
		for name, err := range map[string]error{
			"PutCheckpoint": tx.PutCheckpoint("a", "r1", []byte("x")),
			"PutRunState":   tx.PutRunState("a", "r1", store.Record{Version: 2, Data: []byte("x")}),
			"DeleteRun":     tx.DeleteRun("a", "r1"),
		} {
			if !errors.Is(err, store.ErrNoRun) {
				return fmt.Errorf("%s after DeleteRun: %v, want ErrNoRun", name, err)
			}
		}
		if _, err := tx.AppendEvent("a", "r1", func(uint64) ([]byte, error) { return []byte("{}"), nil }); !errors.Is(err, store.ErrNoRun) {
			return fmt.Errorf("AppendEvent after DeleteRun: %v, want ErrNoRun", err)
		}
		if _, ok, err := tx.Run("b", "r1"); !ok || err != nil {
			return fmt.Errorf("the other tenant's run: found %v, %v", ok, err)
		}
		return nil
	}))
	checkpointIs(t, s, "a", "r1", nil)
	stateIs(t, s, "a", "r1", 0, "")
}
