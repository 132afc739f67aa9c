package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
)

// migrations counts the "ledger schema migrated" records logged to it.
type migrations struct{ n atomic.Int32 }

func (m *migrations) Enabled(context.Context, slog.Level) bool { return true }
func (m *migrations) WithAttrs([]slog.Attr) slog.Handler       { return m }
func (m *migrations) WithGroup(string) slog.Handler            { return m }
func (m *migrations) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "ledger schema migrated" {
		m.n.Add(1)
	}
	return nil
}

// Replicas starting at once on a fresh schema migrate it exactly once.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	var count migrations
	log := slog.New(&count)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := postgres.Open(ctx, postgres.Options{DSN: dsn, Log: log})
			if err != nil {
				t.Error(err)
				return
			}
			_ = s.Close()
		})
	}
	testkit.Wait(t, &wg)
	if n := count.n.Load(); n != 1 {
		t.Fatalf("%d migrations logged, want 1", n)
	}
}

// A schema written by a newer binary is refused.
func TestNewerSchemaRefused(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	s := openOn(t, dsn, postgres.Options{})
	must(t, s.Close())
	pgtest.Exec(t, fmt.Sprintf(`UPDATE %q.schema_version SET version = %d`, schema, postgres.SchemaVersion+1))
	_, err := postgres.Open(ctx, postgres.Options{DSN: dsn})
	if !errors.Is(err, postgres.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
}

// A commit on one store wakes the watchers of another store on the same
// schema (LISTEN/NOTIFY).
func TestCommitWakesOtherReplica(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	a, b := openOn(t, dsn, postgres.Options{}), openOn(t, dsn, postgres.Options{})
	ch := b.Changed()
	must(t, a.Update(ctx, func(tx store.Tx) error { _, err := tx.NextCounter("c"); return err }))
	testkit.Awaited(t, ch)
}

// TestCursorOrderIsCommitOrder: writers on three stores (replicas) append
// concurrently to runs of one tenant. Every watcher, on every store,
// follows the global sequence "after my cursor" and checks, in every
// snapshot, that no sequence at or below the highest one visible is
// missing; a per-run watcher must see each run's events exactly once and
// in order.
func TestCursorOrderIsCommitOrder(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	const replicas, writers, commits, runs = 3, 3, 40, 4
	stores := make([]*postgres.Store, replicas)
	for i := range stores {
		stores[i] = openOn(t, dsn, postgres.Options{})
	}
	must(t, stores[0].Update(ctx, func(tx store.Tx) error {
		for r := range runs {
			if err := tx.CreateRun("t", store.Run{ID: fmt.Sprint("r", r)}); err != nil {
				return err
			}
		}
		return nil
	}))
	total := uint64(replicas * writers * commits)
	var wg sync.WaitGroup
	got := make([][]uint64, replicas)
	for i, s := range stores {
		wg.Go(func() { got[i] = followAll(t, s, total) })
		for r := range runs {
			wg.Go(func() { followRun(t, s, fmt.Sprint("r", r)) })
		}
	}
	var wwg sync.WaitGroup
	for i, s := range stores {
		for w := range writers {
			wwg.Go(func() {
				for k := range commits {
					run := fmt.Sprint("r", (i+w+k)%runs)
					err := s.Update(ctx, func(tx store.Tx) error { _, err := tx.AppendEvent("t", run, body); return err })
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	testkit.Wait(t, &wwg)
	// The per-run followers stop at a final marker event on each run.
	for r := range runs {
		must(t, stores[0].Update(ctx, func(tx store.Tx) error {
			_, err := tx.AppendEvent("t", fmt.Sprint("r", r), func(uint64) ([]byte, error) { return []byte("end"), nil })
			return err
		}))
	}
	testkit.Wait(t, &wg)
	for i, seqs := range got {
		for k, s := range seqs {
			if s != uint64(k+1) {
				t.Fatalf("replica %d: event %d delivered with sequence %d", i, k, s)
			}
		}
	}
}

func body(seq uint64) ([]byte, error) { return fmt.Appendf(nil, "ev-%d", seq), nil }

// followAll follows the tenant's global sequence until it has n events,
// checking each snapshot has no hole below its highest sequence.
func followAll(t *testing.T, s store.Store, n uint64) []uint64 {
	var out []uint64
	cursor := uint64(0)
	for cursor < n {
		ch := s.Changed()
		err := s.View(ctx, func(tx store.ReadTx) error {
			last, err := tx.LastSeq()
			if err != nil {
				return err
			}
			for ; cursor < last; cursor++ {
				ev, ok, err := tx.Event("t", cursor+1)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("sequence %d missing from a snapshot whose last sequence is %d", cursor+1, last)
				}
				out = append(out, ev.Seq)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
			return out
		}
		if cursor < n && !testkit.Awaited(t, ch) {
			return out
		}
	}
	return out
}

// followRun reads one run after its cursor until the "end" event and
// checks that indices come exactly once, in order.
func followRun(t *testing.T, s store.Store, run string) {
	after, index := uint64(0), uint64(0)
	for {
		ch := s.Changed()
		var evs []store.Event
		must(t, s.View(ctx, func(tx store.ReadTx) error {
			var err error
			evs, err = tx.Events("t", run, after, 100)
			return err
		}))
		for _, ev := range evs {
			if ev.Index != index+1 || ev.Seq <= after {
				t.Errorf("run %s: event index %d seq %d after index %d seq %d", run, ev.Index, ev.Seq, index, after)
				return
			}
			after, index = ev.Seq, ev.Index
			if string(ev.Body) == "end" {
				return
			}
		}
		if len(evs) == 0 && !testkit.Awaited(t, ch) {
			return
		}
	}
}

// Leases held by a live owner are not taken over until they expire; the
// owner's renewals keep them, and a takeover bumps the epoch and fences
// the old owner.
func TestLeaseExpiry(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	const ttl = 300 * time.Millisecond
	a := openOn(t, dsn, postgres.Options{LeaseTTL: ttl})
	b := openOn(t, dsn, postgres.Options{LeaseTTL: ttl})
	name := store.RunLease("t", "r")
	ea, err := a.AcquireLease(ctx, name, "A")
	must(t, err)
	if _, err := b.AcquireLease(ctx, name, "B"); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("takeover of a live lease: %v, want ErrLeaseHeld", err)
	}
	held, err := a.RenewLeases(ctx, "A")
	must(t, err)
	if held[name] != ea {
		t.Fatalf("renewal returned %v, want %s at %d", held, name, ea)
	}
	// A stops renewing; B gets the lease once it expires.
	var eb uint64
	for {
		eb, err = b.AcquireLease(ctx, name, "B")
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrLeaseHeld) {
			t.Fatal(err)
		}
		time.Sleep(ttl / 4)
	}
	if eb != ea+1 {
		t.Fatalf("takeover epoch %d, want %d", eb, ea+1)
	}
	held, err = a.RenewLeases(ctx, "A")
	must(t, err)
	if _, ok := held[name]; ok {
		t.Fatal("the old owner still renews a lease taken over")
	}
	if err := a.Update(ctx, func(tx store.Tx) error { return store.CheckLease(tx, name, ea) }); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("old owner's fenced write: %v", err)
	}
}

// TestDroppedConnectionsRetried: every connection of a store is
// terminated by the server; the next transactions run on new connections
// (an attempt that met a dead connection before COMMIT is retried), and
// the listener reconnects, so commits of another store still wake it.
func TestDroppedConnectionsRetried(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	app := "oecp-drop-" + schema
	victim := openOn(t, dsn+"&application_name="+app, postgres.Options{})
	other := openOn(t, dsn, postgres.Options{})
	must(t, victim.Update(ctx, func(tx store.Tx) error { return tx.CreateRun("t", store.Run{ID: "r"}) }))
	ch := victim.Changed()
	pgtest.Exec(t, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
	if !testkit.Awaited(t, ch) { // the listener reconnected and woke its watchers
		return
	}
	must(t, victim.Update(ctx, func(tx store.Tx) error { _, err := tx.AppendEvent("t", "r", body); return err }))
	must(t, victim.View(ctx, func(tx store.ReadTx) error {
		evs, err := tx.Events("t", "r", 0, 10)
		if err == nil && len(evs) != 1 {
			err = fmt.Errorf("%d events after the retried append", len(evs))
		}
		return err
	}))
	ch = victim.Changed()
	must(t, other.Update(ctx, func(tx store.Tx) error { _, err := tx.AppendEvent("t", "r", body); return err }))
	testkit.Awaited(t, ch)
}

// TestDeadOwnersLeasesFreeAtOnce: a lease owner whose sessions all end
// (its process died: the server closes them) loses its leases at once,
// not when they expire: another store's listener notices within a poll,
// wakes its watchers, and the lease is taken over at the next epoch
// although its hour-long TTL is far from over. An owner whose session
// lives keeps its lease.
func TestDeadOwnersLeasesFreeAtOnce(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	app := "oecp-dead-" + schema
	dead := openOn(t, dsn+"&application_name="+app, postgres.Options{LeaseTTL: time.Hour})
	live := openOn(t, dsn, postgres.Options{LeaseTTL: time.Hour})
	survivor := openOn(t, dsn, postgres.Options{LeaseTTL: time.Hour})
	gone, kept := store.RunLease("t", "gone"), store.RunLease("t", "kept")
	epoch, err := dead.AcquireLease(ctx, gone, "dead-owner")
	must(t, err)
	_, err = live.AcquireLease(ctx, kept, "live-owner")
	must(t, err)
	for _, name := range []string{gone, kept} {
		if _, err := survivor.AcquireLease(ctx, name, "survivor"); !errors.Is(err, store.ErrLeaseHeld) {
			t.Fatalf("takeover of %s held by a live owner: %v, want ErrLeaseHeld", name, err)
		}
	}
	changed := survivor.Changed()
	// The dead owner's process is gone: the server ends its sessions.
	pgtest.Exec(t, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
	guard := time.NewTimer(time.Minute) // a hang guard, no timing assertion
	defer guard.Stop()
	for {
		select {
		case <-changed:
		case <-guard.C:
			t.Fatal("the survivor was never woken to take the dead owner's lease over")
		}
		changed = survivor.Changed()
		got, err := survivor.AcquireLease(ctx, gone, "survivor")
		if err == nil {
			if got != epoch+1 {
				t.Fatalf("takeover at epoch %d, want %d", got, epoch+1)
			}
			break
		}
		if !errors.Is(err, store.ErrLeaseHeld) {
			t.Fatal(err)
		}
	}
	if _, err := survivor.AcquireLease(ctx, kept, "survivor"); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("takeover of a live owner's lease: %v, want ErrLeaseHeld", err)
	}
}
