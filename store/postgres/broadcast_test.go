package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
)

// Broadcasts reach the other stores on the schema, whole (a message
// larger than one notification's payload included, split inside no UTF-8
// sequence) and in order; a store never receives its own.
func TestBroadcastReachesOthersInOrder(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	a := openOn(t, dsn, postgres.Options{})
	b := openOn(t, dsn, postgres.Options{})
	got := make(chan string, 16)
	b.OnBroadcast("t", func(p []byte) { got <- string(p) })
	b.OnBroadcast("other", func(p []byte) { got <- "other topic: " + string(p) })
	own := make(chan string, 16)
	a.OnBroadcast("t", func(p []byte) { own <- string(p) })
	long := strings.Repeat("é", 9000) // 18,000 bytes: three notifications
	want := []string{"first", long, "third"}
	for _, m := range want {
		if !a.Broadcast("t", []byte(m)) {
			t.Fatalf("broadcast of %d bytes dropped", len(m))
		}
	}
	for i, w := range want {
		select {
		case g := <-got:
			if g != w {
				t.Fatalf("message %d: %d bytes, want %d", i, len(g), len(w))
			}
		case <-time.After(testkit.HangGuard):
			t.Fatalf("message %d never came", i)
		}
	}
	if !b.Broadcast("t", []byte("to a")) {
		t.Fatal("the other direction: dropped")
	}
	select {
	case m := <-own:
		if m != "to a" {
			t.Fatalf("the other direction: %q", m)
		}
	case <-time.After(testkit.HangGuard):
		t.Fatal("the other direction: nothing came")
	}
	select {
	case m := <-own:
		t.Fatalf("a received its own message %q", m)
	default:
	}
	if a.Broadcast("t", []byte(strings.Repeat("x", store.MaxBroadcastBytes+1))) || a.Broadcast("t", []byte{0xff}) || a.Broadcast("a b", nil) {
		t.Fatal("an oversized or invalid message was queued")
	}
}

// A released lease is announced: a store that saw it held (and remembers
// until when) takes it over as soon as the release reaches it, long before
// the TTL it remembers.
func TestReleasedLeaseIsTakenOverAtOnce(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	a := openOn(t, dsn, postgres.Options{LeaseTTL: time.Hour})
	b := openOn(t, dsn, postgres.Options{LeaseTTL: time.Hour})
	epoch, err := a.AcquireLease(ctx, "run:x", "owner-a")
	must(t, err)
	if _, err := b.AcquireLease(ctx, "run:x", "owner-b"); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("held lease: %v", err)
	}
	woken := b.Changed()
	must(t, a.ReleaseLease(ctx, "run:x", "owner-a", epoch))
	if !testkit.Awaited(t, woken) {
		return
	}
	if _, err := b.AcquireLease(ctx, "run:x", "owner-b"); err != nil {
		t.Fatalf("after the release: %v", err)
	}
}

// A message half received when the listener's connection is lost is
// dropped: its rest went with the connection, and its parts are not kept.
func TestBroadcastHalfReceivedDroppedOnReconnect(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	app := "oecp-parts-" + schema
	s := openOn(t, dsn+"&application_name="+app, postgres.Options{})
	pgtest.Exec(t, `SELECT pg_notify($1, $2)`, postgres.BroadcastChannel(s), "live another-store 1 1/2 t half")
	guard := time.NewTimer(time.Minute) // a hang guard, no timing assertion
	defer guard.Stop()
	for postgres.HalfReceived(s) != 1 {
		select {
		case <-guard.C:
			t.Fatal("the first part never arrived")
		case <-time.After(10 * time.Millisecond):
		}
	}
	changed := s.Changed()
	pgtest.Exec(t, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
	for {
		select {
		case <-changed: // the listener reconnected and woke its watchers
		case <-guard.C:
			t.Fatalf("%d messages still half received after the reconnect", postgres.HalfReceived(s))
		}
		if postgres.HalfReceived(s) == 0 {
			return
		}
		changed = s.Changed()
	}
}
