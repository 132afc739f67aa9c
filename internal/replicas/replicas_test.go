// Package replicas tests several `oecp serve --store postgres` processes
// on one database: the ledger, the watch streams and the runs' supervision
// are shared, so any replica serves any client.
package replicas

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store/postgres/pgtest"
)

var binPath string

// TestMain builds the binary, runs the tests and fails them when any left
// a goroutine running.
func TestMain(m *testing.M) { wiretest.MainWithBinary(m, &binPath) }

// recvOK receives from ch, and whether ch was open, failing the test when
// nothing comes within testkit.HangGuard.
func recvOK[T any](t testing.TB, ch <-chan T) (T, bool) {
	t.Helper()
	select {
	case v, ok := <-ch:
		return v, ok
	case <-time.After(testkit.HangGuard):
		t.Fatalf("nothing received within %v: the test is stuck", testkit.HangGuard)
	}
	var zero T
	return zero, false
}

var ctx = context.Background()

// leaseTTL is short so that a takeover happens within the test.
const leaseTTL = "1s"

// cluster is n replicas on one fresh schema.
type cluster struct {
	schema   string
	replicas []*wiretest.Server
	// dsn and ttl are the database and lease TTL replicas start with.
	dsn, ttl string
}

func startCluster(t *testing.T, n int) *cluster {
	t.Helper()
	return startClusterTTL(t, n, leaseTTL)
}

// startClusterTTL is startCluster with the replicas' lease TTL.
func startClusterTTL(t *testing.T, n int, ttl string) *cluster {
	t.Helper()
	dsn, schema := pgtest.Schema(t)
	c := &cluster{schema: schema, dsn: dsn, ttl: ttl}
	for range n {
		c.add(t)
	}
	return c
}

// add starts one more replica.
func (c *cluster) add(t *testing.T) *wiretest.Server {
	t.Helper()
	// Each replica has a data directory of its own: one directory
	// serves one server.
	s := wiretest.StartServer(t, binPath, nil,
		"--store", "postgres", "--dsn", c.dsn, "--lease-ttl", c.ttl, "--pg-pool", "4", "--data", t.TempDir())
	c.replicas = append(c.replicas, s)
	return s
}

func dial(t *testing.T, s *wiretest.Server) *client.Conn {
	t.Helper()
	c, err := client.Dial(ctx, s.URL, client.DialOptions{AllowPlaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// sleepGraph is one builtin.sleep step (input.ms, two attempts) and a
// succeed.
//
//go:embed testdata/sleep.json
var sleepGraph []byte

func input(ms int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"text":"hi","ms":%d}`, ms)) }

// until collects events from sub up to and including the first that stop
// accepts.
func until(t *testing.T, sub *client.Subscription[client.WatchEvent], stop func(client.WatchEvent) bool) []client.WatchEvent {
	t.Helper()
	var out []client.WatchEvent
	for ev := range sub.Events() {
		out = append(out, ev)
		if stop(ev) {
			return out
		}
	}
	t.Fatalf("watch ended after %d events: %v", len(out), sub.Err())
	return nil
}

func finished(ev client.WatchEvent) bool { return ev.Event.Type == protocol.EventFinished }

// cursors is the list of cursors of evs, which must strictly increase.
func cursors(t *testing.T, evs []client.WatchEvent) []string {
	t.Helper()
	var out []string
	last := uint64(0)
	for _, ev := range evs {
		var n uint64
		if _, err := fmt.Sscanf(ev.Cursor, "cursor-%d", &n); err != nil || n <= last {
			t.Fatalf("cursor %q after %d", ev.Cursor, last)
		}
		last = n
		out = append(out, ev.Cursor)
	}
	return out
}

// TestApplyOnOneWatchOnOthers: apply on one replica; watches on the two
// others see every event of the run, the same, in order; a watch closed
// half way and resumed on another replica from its last cursor continues
// with no gap and no repeat.
func TestApplyOnOneWatchOnOthers(t *testing.T) {
	cl := startCluster(t, 3)
	a, b, c := dial(t, cl.replicas[0]), dial(t, cl.replicas[1]), dial(t, cl.replicas[2])
	wb, _, err := b.Watch(ctx, client.WatchParams{})
	if err != nil {
		t.Fatal(err)
	}
	wc, _, err := c.Watch(ctx, client.WatchParams{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Apply(ctx, client.ApplyParams{Graph: sleepGraph, Input: input(50), IdempotencyKey: "apply-1"})
	if err != nil {
		t.Fatal(err)
	}
	onB := until(t, wb, finished)
	// c reads the first two events, then resumes on b from its cursor.
	first := until(t, wc, func(client.WatchEvent) bool { return true })
	first = append(first, until(t, wc, func(client.WatchEvent) bool { return true })...)
	must(t, wc.Close())
	resumed, _, err := b.Watch(ctx, client.WatchParams{RunID: *res.RunID, FromCursor: first[len(first)-1].Cursor})
	if err != nil {
		t.Fatal(err)
	}
	onC := append(first, until(t, resumed, finished)...)
	want, got := cursors(t, onB), cursors(t, onC)
	if strings.Join(want, " ") != strings.Join(got, " ") {
		t.Fatalf("watch on b: %v\nwatch on c, resumed on b: %v", want, got)
	}
	if onB[0].RunID != *res.RunID || onB[0].Event.Admission == nil {
		t.Fatalf("first event %s is not the run's admission", onB[0].Raw)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSameIdempotencyKeyCommitsOnce: the same apply, with the same key, on
// two replicas at once commits one run; both callers get its receipt.
func TestSameIdempotencyKeyCommitsOnce(t *testing.T) {
	cl := startCluster(t, 2)
	conns := []*client.Conn{dial(t, cl.replicas[0]), dial(t, cl.replicas[1])}
	p := client.ApplyParams{Graph: sleepGraph, Input: input(10), IdempotencyKey: "same-key"}
	results := make([]*protocol.ApplyResult, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			r, err := c.Apply(ctx, p)
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = r
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	r0, r1 := results[0], results[1]
	if *r0.RunID != *r1.RunID || *r0.Generation != *r1.Generation || r0.Deduped == r1.Deduped {
		t.Fatalf("two commits of one key: %+v and %+v", r0, r1)
	}
	got, err := conns[1].Get(ctx, client.GetParams{})
	must(t, err)
	if g := got.Status.ObservedGeneration; g == nil || *g != 1 || *got.Status.CurrentRunID != *r0.RunID {
		t.Fatalf("status %+v after one admitted apply", got.Status)
	}
}

// TestKilledReplicaRunMoves: of three replicas, the one that runs a
// builtin.sleep step of a v1 run (one attempt) is killed (SIGKILL) under a
// 60 s lease. Another replica takes the run over well before the lease
// would have expired: the lost execution is recorded interrupted, with a
// fault naming it, not crash, and the same attempt runs again (the only
// one: a crash would have failed the run), and the run finishes.
func TestKilledReplicaRunMoves(t *testing.T) {
	cl := startClusterTTL(t, 3, "60s")
	a := dial(t, cl.replicas[0])
	res, err := a.Apply(ctx, client.ApplyParams{Graph: oneAttempt(t), Input: input(2000), IdempotencyKey: "kill"})
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := a.Watch(ctx, client.WatchParams{RunID: *res.RunID})
	must(t, err)
	until(t, w, func(ev client.WatchEvent) bool { return ev.Event.Type == protocol.EventNodeBegin })
	holder := leaseHolder(t, cl)
	expires := leaseExpiry(t, cl)
	t.Logf("replica %d runs the step; killing it", holder)
	_ = cl.replicas[holder].Signal(t, syscall.SIGKILL)
	survivor := cl.replicas[(holder+1)%len(cl.replicas)]
	s := dial(t, survivor)
	full, _, err := s.Watch(ctx, client.WatchParams{RunID: *res.RunID})
	must(t, err)
	begins := 0
	evs := until(t, full, func(ev client.WatchEvent) bool {
		if ev.Event.Type == protocol.EventNodeBegin {
			begins++
		}
		// A crash holds the run (its one attempt failed): stop there too.
		return begins == 2 || finished(ev) || ev.Event.Type == protocol.EventNodeEnd
	})
	if begins != 2 {
		t.Fatalf("the step did not run again; last event: %s", evs[len(evs)-1].Raw)
	}
	if !beforeNow(t, cl, expires) {
		t.Fatalf("the step started again only after the killed replica's lease expired (%v)", expires)
	}
	evs = append(evs, until(t, full, finished)...)
	var lost bool
	for _, ev := range evs {
		switch {
		case ev.Event.Type == protocol.EventNodeBegin && ev.Event.Node.Attempt != 1:
			t.Fatalf("attempt %d dispatched: the lost attempt was spent:%s", ev.Event.Node.Attempt, ev.Raw)
		case ev.Event.Type == protocol.EventNodeEnd && strings.Contains(string(ev.Event.Outcome), `"crash"`):
			t.Fatalf("the lost execution ended as crash: %s", ev.Raw)
		case ev.Event.Type == protocol.EventFault && strings.Contains(string(ev.Raw), `"eventId":"lost-`) &&
			strings.Contains(string(ev.Raw), `"executionRef":"`+*res.RunID+`/nap/1"`):
			lost = true
		}
	}
	got, err := s.Get(ctx, client.GetParams{})
	must(t, err)
	if !lost || got.TerminalResult == nil || got.TerminalResult.Status != "succeeded" {
		t.Fatalf("after the kill: lost fault=%v terminal=%+v", lost, got.TerminalResult)
	}
}

// oneAttempt is sleepGraph with one attempt at its step.
func oneAttempt(t *testing.T) []byte {
	t.Helper()
	g := strings.Replace(string(sleepGraph), `"attempts":2`, `"attempts":1`, 1)
	if g == string(sleepGraph) {
		t.Fatal("sleepGraph has no two attempts to change")
	}
	return []byte(g)
}

// leaseHolder is the index of the replica holding the one run lease (its
// owner id starts with "pid-<pid>-").
func leaseHolder(t *testing.T, cl *cluster) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, pgtest.ServerDSN())
	must(t, err)
	defer conn.Close(ctx)
	for {
		var owner string
		err := conn.QueryRow(ctx, "SELECT convert_from(owner, 'UTF8') FROM "+pgx.Identifier{cl.schema, "leases"}.Sanitize()+" WHERE owner <> ''").Scan(&owner)
		if err == nil {
			for i, r := range cl.replicas {
				if strings.HasPrefix(owner, fmt.Sprintf("pid-%d-", r.Cmd.Process.Pid)) {
					return i
				}
			}
			t.Fatalf("lease owner %q is no replica", owner)
		}
		if err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
