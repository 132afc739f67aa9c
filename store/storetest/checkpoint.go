package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/oecp/oecp/store"
)

// checkpointIs checks the run's checkpoint as a new read sees it: want
// nil means none.
func checkpointIs(t *testing.T, s store.Store, tenant, runID string, want []byte) {
	t.Helper()
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		return checkpointIn(tx, tenant, runID, want)
	}))
}

func checkpointIn(tx store.ReadTx, tenant, runID string, want []byte) error {
	b, ok, err := tx.Checkpoint(tenant, runID)
	switch {
	case err != nil:
		return err
	case want == nil && ok:
		return fmt.Errorf("%s/%s has a checkpoint of %d bytes, want none", tenant, runID, len(b))
	case want != nil && (!ok || !bytes.Equal(b, want)):
		return fmt.Errorf("checkpoint of %s/%s: %d bytes (found %v), want %d", tenant, runID, len(b), ok, len(want))
	}
	return nil
}

func testCheckpoints(t *testing.T, s store.Store) {
	createRun(t, s, "a", "r1")
	createRun(t, s, "a", "r2")
	createRun(t, s, "b", "r1") // another tenant's run of the same id
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutCheckpoint("a", "zz", []byte("x")) }); !errors.Is(err, store.ErrNoRun) {
		t.Fatalf("checkpoint of an unknown run: %v, want ErrNoRun", err)
	}
	checkpointIs(t, s, "a", "zz", nil)
	checkpointIs(t, s, "a", "r1", nil)

	must(t, s.Update(ctx, func(tx store.Tx) error {
		buf := []byte("one")
		if err := tx.PutCheckpoint("a", "r1", buf); err != nil {
			return err
		}
		copy(buf, "XXX") // the store kept its own copy
		if err := checkpointIn(tx, "a", "r1", []byte("one")); err != nil {
			return fmt.Errorf("in its own transaction: %w", err)
		}
		return tx.PutCheckpoint("b", "r1", []byte{})
	}))
	checkpointIs(t, s, "a", "r1", []byte("one"))
	checkpointIs(t, s, "b", "r1", []byte{}) // empty, but there
	checkpointIs(t, s, "a", "r2", nil)
	checkpointIs(t, s, "c", "r1", nil)

	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutCheckpoint("a", "r1", []byte("two")) }))
	checkpointIs(t, s, "a", "r1", []byte("two"))

	boom := errors.New("boom")
	if err := s.Update(ctx, func(tx store.Tx) error {
		return errors.Join(tx.PutCheckpoint("a", "r1", []byte("three")), tx.PutCheckpoint("a", "r2", []byte("x")), boom)
	}); !errors.Is(err, boom) {
		t.Fatalf("Update = %v", err)
	}
	checkpointIs(t, s, "a", "r1", []byte("two"))
	checkpointIs(t, s, "a", "r2", nil)
}

// testLargeCheckpoint: a bundle of several MiB is kept byte for byte.
func testLargeCheckpoint(t *testing.T, s store.Store) {
	createRun(t, s, "a", "r")
	big := make([]byte, 6<<20)
	r := rand.NewChaCha8([32]byte{1})
	_, _ = r.Read(big)
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutCheckpoint("a", "r", big) }))
	checkpointIs(t, s, "a", "r", big)
	smaller := big[:1<<20]
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutCheckpoint("a", "r", smaller) }))
	checkpointIs(t, s, "a", "r", smaller)
}

// testDeleteRunCheckpoint: Pruner.DeleteRun deletes the run's checkpoint
// and no other; a run created again under the id has none.
func testDeleteRunCheckpoint(t *testing.T, s store.Store) {
	for _, k := range [][2]string{{"a", "r1"}, {"a", "r2"}, {"b", "r1"}} {
		createRun(t, s, k[0], k[1])
		must(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutCheckpoint(k[0], k[1], []byte(k[0]+k[1])) }))
	}
	must(t, s.Update(ctx, func(p store.Tx) error { return p.DeleteRun("a", "r1") }))
	checkpointIs(t, s, "a", "r1", nil)
	checkpointIs(t, s, "a", "r2", []byte("ar2"))
	checkpointIs(t, s, "b", "r1", []byte("br1"))
	createRun(t, s, "a", "r1")
	checkpointIs(t, s, "a", "r1", nil)
}
