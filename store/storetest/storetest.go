// Package storetest is the conformance suite of the store port. Every
// Store implementation runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return open(t) })
//	}
//
// It checks the transactional contract the backends rely on: atomic
// rollback of every kind of write, optimistic cluster versions, write-once
// idempotency keys, per-run event order over one global sequence,
// tombstones, tenant isolation, runs' checkpoints, indexes, commit
// wake-ups and serialized concurrent writers, deletion (store.Pruner) and
// evidence (store.Evidence). RunLeases checks the leases (store.Leaser); it
// assumes that a lease another owner holds belongs to a process that is
// gone, so a store whose leases expire runs it with a very short TTL.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/oecp/oecp/store"
)

// Run runs the suite; open returns a fresh, empty store for each subtest.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	subtests(t, open, []subtest{
		{"ClusterVersions", testClusterVersions},
		{"RollbackLeavesNoTrace", testRollback},
		{"IdempotencyWriteOnce", testIdempotency},
		{"RunsAndEvents", testRunsAndEvents},
		{"EventPaging", testEventPaging},
		{"Tombstone", testTombstone},
		{"FirstRunAfter", testFirstRunAfter},
		{"TenantIsolation", testTenantIsolation},
		{"ChangedAfterCommit", testChanged},
		{"ReadOnlyView", testReadOnly},
		{"ConcurrentWritersSerialize", testConcurrent},
		{"ReadYourWrites", testReadYourWrites},
		// Indexes (index.go).
		{"IndexEntries", testIndexEntries},
		{"IndexBelow", testIndexBelow},
		{"IndexTransactions", testIndexTransactions},
		// The deletion port (store.Pruner, prune.go).
		{"DeleteRun", testDeleteRun},
		{"DeleteReceiptAndCluster", testDeleteRecords},
		{"DeleteRollsBack", testDeleteRollback},
		{"DeletedInItsTransaction", testDeletedInItsTransaction},
		// The evidence port (store.Evidence, evidence.go).
		{"Evidence", testEvidence},
		// Runs' checkpoints (checkpoint.go).
		{"Checkpoints", testCheckpoints},
		{"LargeCheckpoint", testLargeCheckpoint},
		{"DeleteRunDeletesCheckpoint", testDeleteRunCheckpoint},
		{"RunStates", testRunStates},
		{"DeleteRunDeletesRunState", testDeleteRunState},
	})
}

// subtest is one named check of a store.
type subtest struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

// subtests runs each check on a fresh store from open, closed after it.
func subtests(t *testing.T, open func(t *testing.T) store.Store, tests []subtest) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() })
			tc.fn(t, s)
		})
	}
}

var ctx = context.Background()

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func body(seq uint64) ([]byte, error) { return []byte("ev-" + strconv.FormatUint(seq, 10)), nil }

func appendN(t *testing.T, s store.Store, tenant, run string, n int) []store.Event {
	t.Helper()
	var out []store.Event
	must(t, s.Update(ctx, func(tx store.Tx) error {
		for range n {
			ev, err := tx.AppendEvent(tenant, run, body)
			if err != nil {
				return err
			}
			out = append(out, ev)
		}
		return nil
	}))
	return out
}

func createRun(t *testing.T, s store.Store, tenant, run string) {
	t.Helper()
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.CreateRun(tenant, store.Run{ID: run, Seed: []byte("null")}) }))
}

func testClusterVersions(t *testing.T, s store.Store) {
	must(t, s.Update(ctx, func(tx store.Tx) error {
		if _, ok, err := tx.Cluster("a"); err != nil || ok {
			return fmt.Errorf("fresh store has cluster: %v %v", ok, err)
		}
		if err := tx.PutCluster("a", store.Cluster{Version: 2, Data: []byte("x")}); !errors.Is(err, store.ErrVersionConflict) {
			return fmt.Errorf("version 2 on empty: %v, want ErrVersionConflict", err)
		}
		return tx.PutCluster("a", store.Cluster{Version: 1, Data: []byte("one")})
	}))
	must(t, s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster("a", store.Cluster{Version: 1, Data: []byte("again")}); !errors.Is(err, store.ErrVersionConflict) {
			return fmt.Errorf("stale version: %v", err)
		}
		return tx.PutCluster("a", store.Cluster{Version: 2, Data: []byte("two")})
	}))
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		c, ok, err := tx.Cluster("a")
		if err != nil || !ok || c.Version != 2 || string(c.Data) != "two" {
			return fmt.Errorf("got %+v %v %v", c, ok, err)
		}
		return nil
	}))
}

func testRollback(t *testing.T, s store.Store) {
	createRun(t, s, "a", "r0")
	appendN(t, s, "a", "r0", 1)
	var before uint64
	must(t, s.View(ctx, func(tx store.ReadTx) error { var err error; before, err = tx.LastSeq(); return err }))
	ch := s.Changed()
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster("a", store.Cluster{Version: 1, Data: []byte("x")}); err != nil {
			return err
		}
		if err := tx.PutIdempotency("a", "k", store.Receipt{Fingerprint: "f", Result: []byte("{}")}); err != nil {
			return err
		}
		if err := tx.CreateRun("a", store.Run{ID: "r1"}); err != nil {
			return err
		}
		if _, err := tx.AppendEvent("a", "r1", body); err != nil {
			return err
		}
		if _, err := tx.AppendEvent("a", "r0", body); err != nil {
			return err
		}
		if err := tx.TombstoneRun("a", "r0"); err != nil {
			return err
		}
		if _, err := tx.NextCounter("run"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want the callback's error", err)
	}
	select {
	case <-ch:
		t.Fatal("a rolled-back transaction woke watchers")
	default:
	}
	// An encode failure aborts too.
	encErr := errors.New("encode")
	err = s.Update(ctx, func(tx store.Tx) error {
		_, err := tx.AppendEvent("a", "r0", func(uint64) ([]byte, error) { return nil, encErr })
		return err
	})
	if !errors.Is(err, encErr) {
		t.Fatalf("encode failure: %v", err)
	}
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		if _, ok, _ := tx.Cluster("a"); ok {
			return errors.New("cluster survived rollback")
		}
		if _, ok, _ := tx.Idempotency("a", "k"); ok {
			return errors.New("receipt survived rollback")
		}
		if _, ok, _ := tx.Run("a", "r1"); ok {
			return errors.New("run survived rollback")
		}
		r0, _, _ := tx.Run("a", "r0")
		if r0.Tombstoned || r0.Count != 1 {
			return fmt.Errorf("r0 changed by rollback: %+v", r0)
		}
		evs, _ := tx.Events("a", "r0", 0, 10)
		if len(evs) != 1 {
			return fmt.Errorf("r0 has %d events", len(evs))
		}
		if last, _ := tx.LastSeq(); last != before {
			return fmt.Errorf("sequence moved to %d by a rollback (was %d)", last, before)
		}
		return nil
	}))
	must(t, s.Update(ctx, func(tx store.Tx) error {
		v, err := tx.NextCounter("run")
		if err == nil && v != 1 {
			err = fmt.Errorf("counter after rollback = %d, want 1", v)
		}
		return err
	}))
}

func testIdempotency(t *testing.T, s store.Store) {
	must(t, s.Update(ctx, func(tx store.Tx) error {
		return tx.PutIdempotency("a", "k", store.Receipt{Fingerprint: "f1", Result: []byte(`{"x":1}`)})
	}))
	err := s.Update(ctx, func(tx store.Tx) error {
		return tx.PutIdempotency("a", "k", store.Receipt{Fingerprint: "f2"})
	})
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("second put: %v, want ErrExists", err)
	}
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		r, ok, err := tx.Idempotency("a", "k")
		if err != nil || !ok || r.Fingerprint != "f1" || string(r.Result) != `{"x":1}` {
			return fmt.Errorf("got %+v %v %v", r, ok, err)
		}
		return nil
	}))
}

func testRunsAndEvents(t *testing.T, s store.Store) {
	if err := s.Update(ctx, func(tx store.Tx) error {
		_, err := tx.AppendEvent("a", "nope", body)
		return err
	}); !errors.Is(err, store.ErrNoRun) {
		t.Fatalf("append to unknown run: %v", err)
	}
	createRun(t, s, "a", "r1")
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateRun("a", store.Run{ID: "r1"}) }); !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate run: %v", err)
	}
	createRun(t, s, "a", "r2")
	e1 := appendN(t, s, "a", "r1", 2)
	e2 := appendN(t, s, "a", "r2", 1)
	e3 := appendN(t, s, "a", "r1", 1)
	if e1[0].Seq != 1 || e1[1].Seq != 2 || e2[0].Seq != 3 || e3[0].Seq != 4 {
		t.Fatalf("sequences %d %d %d %d, want 1 2 3 4", e1[0].Seq, e1[1].Seq, e2[0].Seq, e3[0].Seq)
	}
	if e1[0].Index != 1 || e1[1].Index != 2 || e2[0].Index != 1 || e3[0].Index != 3 {
		t.Fatal("per-run index wrong")
	}
	if string(e3[0].Body) != "ev-4" {
		t.Fatalf("body %q: encode must see the assigned sequence", e3[0].Body)
	}
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		r, ok, _ := tx.Run("a", "r1")
		if !ok || r.FirstSeq != 1 || r.LastSeq != 4 || r.Count != 3 || string(r.Seed) != "null" {
			return fmt.Errorf("run record %+v", r)
		}
		evs, _ := tx.Events("a", "r1", 0, 100)
		if len(evs) != 3 || evs[0].Seq != 1 || evs[1].Seq != 2 || evs[2].Seq != 4 {
			return fmt.Errorf("events %+v", evs)
		}
		ev, ok, _ := tx.Event("a", 3)
		if !ok || ev.RunID != "r2" || string(ev.Body) != "ev-3" {
			return fmt.Errorf("event 3: %+v %v", ev, ok)
		}
		if last, _ := tx.LastSeq(); last != 4 {
			return fmt.Errorf("LastSeq %d", last)
		}
		return nil
	}))
}

func testEventPaging(t *testing.T, s store.Store) {
	createRun(t, s, "a", "r")
	appendN(t, s, "a", "r", 600)
	var got []uint64
	after := uint64(0)
	for {
		var page []store.Event
		must(t, s.View(ctx, func(tx store.ReadTx) error {
			var err error
			page, err = tx.Events("a", "r", after, 256)
			return err
		}))
		if len(page) == 0 {
			break
		}
		if len(page) > 256 {
			t.Fatalf("page of %d > limit", len(page))
		}
		for _, ev := range page {
			got = append(got, ev.Seq)
			after = ev.Seq
		}
	}
	if len(got) != 600 {
		t.Fatalf("paged %d events", len(got))
	}
	for i, s := range got {
		if s != uint64(i+1) {
			t.Fatalf("gap or reorder at %d: %d", i, s)
		}
	}
}

func testTombstone(t *testing.T, s store.Store) {
	createRun(t, s, "a", "r")
	appendN(t, s, "a", "r", 3)
	must(t, s.Update(ctx, func(tx store.Tx) error { return tx.TombstoneRun("a", "r") }))
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		r, ok, _ := tx.Run("a", "r")
		if !ok || !r.Tombstoned || r.LastSeq != 3 {
			return fmt.Errorf("tombstoned run %+v %v", r, ok)
		}
		if evs, _ := tx.Events("a", "r", 0, 10); len(evs) != 0 {
			return fmt.Errorf("tombstoned run still has %d events", len(evs))
		}
		if _, ok, _ := tx.Event("a", 2); ok {
			return errors.New("tombstoned event still readable")
		}
		return nil
	}))
	if err := s.Update(ctx, func(tx store.Tx) error { _, err := tx.AppendEvent("a", "r", body); return err }); !errors.Is(err, store.ErrTombstoned) {
		t.Fatalf("append to tombstoned: %v", err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.TombstoneRun("a", "zz") }); !errors.Is(err, store.ErrNoRun) {
		t.Fatalf("tombstone unknown: %v", err)
	}
}

func testFirstRunAfter(t *testing.T, s store.Store) {
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		if _, ok, _ := tx.FirstRunAfter("a", 0); ok {
			return errors.New("run in empty store")
		}
		return nil
	}))
	createRun(t, s, "a", "r1")
	appendN(t, s, "a", "r1", 2) // 1,2
	createRun(t, s, "b", "x")
	appendN(t, s, "b", "x", 1)    // 3
	createRun(t, s, "a", "empty") // no events: never attached to
	createRun(t, s, "a", "r2")
	appendN(t, s, "a", "r2", 1) // 4
	createRun(t, s, "a", "r3")
	appendN(t, s, "a", "r3", 1) // 5
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		for _, c := range []struct {
			after uint64
			want  string
		}{{0, "r1"}, {1, "r2"}, {2, "r2"}, {3, "r2"}, {4, "r3"}, {5, ""}} {
			r, ok, err := tx.FirstRunAfter("a", c.after)
			if err != nil {
				return err
			}
			if (c.want == "") == ok || (ok && r.ID != c.want) {
				return fmt.Errorf("FirstRunAfter(%d) = %q %v, want %q", c.after, r.ID, ok, c.want)
			}
		}
		return nil
	}))
}

func testTenantIsolation(t *testing.T, s store.Store) {
	must(t, s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster("a", store.Cluster{Version: 1, Data: []byte("a")}); err != nil {
			return err
		}
		if err := tx.PutIdempotency("a", "k", store.Receipt{Fingerprint: "a"}); err != nil {
			return err
		}
		// The same key and run id under another tenant are independent.
		if err := tx.PutIdempotency("b", "k", store.Receipt{Fingerprint: "b"}); err != nil {
			return err
		}
		if err := tx.CreateRun("a", store.Run{ID: "r"}); err != nil {
			return err
		}
		return tx.CreateRun("b", store.Run{ID: "r"})
	}))
	appendN(t, s, "a", "r", 1)
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		if _, ok, _ := tx.Cluster("b"); ok {
			return errors.New("b sees a's cluster")
		}
		if r, _, _ := tx.Idempotency("b", "k"); r.Fingerprint != "b" {
			return errors.New("receipts not tenant-scoped")
		}
		if evs, _ := tx.Events("b", "r", 0, 10); len(evs) != 0 {
			return errors.New("b sees a's events")
		}
		if _, ok, _ := tx.Event("b", 1); ok {
			return errors.New("b reads a's event by sequence")
		}
		if _, ok, _ := tx.FirstRunAfter("b", 0); ok {
			return errors.New("b's run without events attached")
		}
		return nil
	}))
}

func testChanged(t *testing.T, s store.Store) {
	ch := s.Changed()
	must(t, s.View(ctx, func(store.ReadTx) error { return nil }))
	must(t, s.Update(ctx, func(store.Tx) error { return nil })) // writes nothing
	select {
	case <-ch:
		t.Fatal("woken without a write")
	default:
	}
	must(t, s.Update(ctx, func(tx store.Tx) error { _, err := tx.NextCounter("c"); return err }))
	<-ch // must be closed now; a hang here fails the test by timeout
	if s.Changed() == ch {
		t.Fatal("Changed returned a closed channel after the commit")
	}
}

func testReadOnly(t *testing.T, s store.Store) {
	err := s.View(ctx, func(tx store.ReadTx) error {
		if w, ok := tx.(store.Tx); ok {
			return w.PutCluster("a", store.Cluster{Version: 1})
		}
		return store.ErrReadOnly
	})
	if !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("write through View: %v", err)
	}
}

func testConcurrent(t *testing.T, s store.Store) {
	createRun(t, s, "a", "r")
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				err := s.Update(ctx, func(tx store.Tx) error {
					c, _, err := tx.Cluster("a")
					if err != nil {
						return err
					}
					n, _ := strconv.Atoi(string(c.Data))
					if err := tx.PutCluster("a", store.Cluster{Version: c.Version + 1, Data: []byte(strconv.Itoa(n + 1))}); err != nil {
						return err
					}
					st, _, err := tx.RunState("a", "r")
					if err != nil {
						return err
					}
					m, _ := strconv.Atoi(string(st.Data))
					if err := tx.PutRunState("a", "r", store.Record{Version: st.Version + 1, Data: []byte(strconv.Itoa(m + 1))}); err != nil {
						return err
					}
					_, err = tx.AppendEvent("a", "r", body)
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		c, _, _ := tx.Cluster("a")
		if string(c.Data) != strconv.Itoa(writers*each) || c.Version != writers*each {
			return fmt.Errorf("lost update: %s v%d", c.Data, c.Version)
		}
		if st, _, _ := tx.RunState("a", "r"); string(st.Data) != strconv.Itoa(writers*each) || st.Version != writers*each {
			return fmt.Errorf("lost run state update: %s v%d", st.Data, st.Version)
		}
		evs, _ := tx.Events("a", "r", 0, writers*each+1)
		for i, ev := range evs {
			if ev.Seq != uint64(i+1) || ev.Index != uint64(i+1) {
				return fmt.Errorf("event %d has seq %d index %d", i, ev.Seq, ev.Index)
			}
		}
		if len(evs) != writers*each {
			return fmt.Errorf("%d events", len(evs))
		}
		return nil
	}))
}

func testReadYourWrites(t *testing.T, s store.Store) {
	must(t, s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutCluster("a", store.Cluster{Version: 1, Data: []byte("1")}); err != nil {
			return err
		}
		if c, ok, _ := tx.Cluster("a"); !ok || string(c.Data) != "1" {
			return errors.New("cluster write not visible in its transaction")
		}
		if err := tx.PutIdempotency("a", "k", store.Receipt{Fingerprint: "f"}); err != nil {
			return err
		}
		if _, ok, _ := tx.Idempotency("a", "k"); !ok {
			return errors.New("receipt not visible in its transaction")
		}
		if err := tx.CreateRun("a", store.Run{ID: "r"}); err != nil {
			return err
		}
		ev, err := tx.AppendEvent("a", "r", body)
		if err != nil {
			return err
		}
		if r, _, _ := tx.Run("a", "r"); r.Count != 1 || r.FirstSeq != ev.Seq {
			return fmt.Errorf("run record not updated in its transaction: %+v", r)
		}
		if evs, _ := tx.Events("a", "r", 0, 5); len(evs) != 1 {
			return errors.New("event not visible in its transaction")
		}
		if got, ok, _ := tx.Event("a", ev.Seq); !ok || got.Seq != ev.Seq {
			return errors.New("event by sequence not visible in its transaction")
		}
		if r, ok, _ := tx.FirstRunAfter("a", 0); !ok || r.ID != "r" {
			return errors.New("new run not found by FirstRunAfter in its transaction")
		}
		if last, _ := tx.LastSeq(); last != ev.Seq {
			return errors.New("LastSeq not updated in its transaction")
		}
		return nil
	}))
}
