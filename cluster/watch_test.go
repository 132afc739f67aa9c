package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

func cursors(ns []server.Notification) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Cursor)
	}
	return strings.Join(out, ",")
}

// expectResume watches run-1 from cursor from and expects the events with
// the cursors want (comma-separated) next.
func expectResume(t *testing.T, b *cluster.Backend, from, want string) {
	t.Helper()
	s, err := b.Watch(bg, protocol.WatchParams{RunID: ptr("run-1"), FromCursor: &from})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stream.Close()
	if got := cursors(nextN(t, s.Stream, strings.Count(want, ",")+1)); got != want {
		t.Fatalf("from %s: got %s, want %s", from, got, want)
	}
}

// update appends one phase record (an update of the log level).
func update(t testing.TB, b *cluster.Backend, ctx context.Context, key string) {
	t.Helper()
	if _, err := b.Update(ctx, protocol.UpdateParams{LogLevel: ptr("debug"), IfGeneration: 1, IdempotencyKey: key}); err != nil {
		t.Fatal(err)
	}
}

var testFault = cluster.Fault{EventID: "evt-1", Code: "unavailable", Consequence: "turn_failed", Retry: "retryable_after_backoff", Action: "retry", Severity: "error", Summary: "upstream worker unavailable", Source: []cluster.FaultSource{{Component: "worker-dispatch"}}}

// blocked reports whether a goroutine calling s.Next stays durably blocked
// (no event is deliverable). It must run inside a synctest bubble.
func blocked(t *testing.T, s server.Stream) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := s.Next(ctx); done <- err }()
	synctest.Wait()
	select {
	case <-done:
		cancel()
		return false
	default:
	}
	cancel()
	<-done
	return true
}

func TestWatchParksThenAttachesToTheNextRunOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := cluster.NewFixture(cluster.Isolated)
		s, err := b.Watch(bg, protocol.WatchParams{})
		if err != nil || mustJSON(t, s.Result) != `{"subscriptionId":"sub-1","runId":null,"atCursor":null}` {
			t.Fatalf("%v %s", err, mustJSON(t, s.Result))
		}
		defer s.Stream.Close()
		if !blocked(t, s.Stream) {
			t.Fatal("parked watch delivered without a run")
		}
		if _, err := b.Apply(bg, applyP(goldenGraph, "a", nil)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Stop(bg, protocol.StopParams{Mode: "force", IfGeneration: 1, IdempotencyKey: "s"}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Resubmit(bg, protocol.ResubmitParams{IfGeneration: 1, IfRunID: "run-1", IdempotencyKey: "r"}); err != nil {
			t.Fatal(err)
		}
		ns := nextN(t, s.Stream, 3)
		if cursors(ns) != "cursor-1,cursor-2,cursor-3" || !strings.HasPrefix(string(ns[0].Rest), `,"runId":"run-1","cursor":"cursor-1","event":{"type":"phase"`) {
			t.Fatalf("%s %s", cursors(ns), ns[0].Rest)
		}
		// Subscribers of an old run do not follow to the new one.
		if !blocked(t, s.Stream) {
			t.Fatal("watch followed to run-2")
		}
	})
}

func TestWatchReplaysThenSwitchesToLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := running(t)
		update(t, b, bg, "u1")
		s, err := b.Watch(bg, protocol.WatchParams{})
		if err != nil || mustJSON(t, s.Result) != `{"subscriptionId":"sub-1","runId":"run-1","atCursor":"cursor-2"}` {
			t.Fatalf("%v %s", err, mustJSON(t, s.Result))
		}
		defer s.Stream.Close()
		if got := cursors(nextN(t, s.Stream, 2)); got != "cursor-1,cursor-2" {
			t.Fatal(got)
		}
		if !blocked(t, s.Stream) {
			t.Fatal("delivered beyond the tail")
		}
		update(t, b, bg, "u2")
		if got := cursors(nextN(t, s.Stream, 1)); got != "cursor-3" {
			t.Fatal(got)
		}
		// fromCursor is exclusive.
		expectResume(t, b, "cursor-1", "cursor-2,cursor-3")
	})
}

func TestWatchResolutionErrors(t *testing.T) {
	b := running(t)
	if _, err := b.Stop(bg, protocol.StopParams{Mode: "force", IfGeneration: 1, IdempotencyKey: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Resubmit(bg, protocol.ResubmitParams{IfGeneration: 1, IfRunID: "run-1", IdempotencyKey: "r"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []protocol.WatchParams{
		{RunID: ptr("run-9")},
		{RunID: ptr("run-2"), FromCursor: ptr("cursor-99")},
		{RunID: ptr("run-2"), FromCursor: ptr("cursor-1")}, // a cursor of another run
		{FromCursor: ptr("bogus")},
		{FromCursor: ptr("cursor-01")},
	} {
		_, err := b.Watch(bg, p)
		if errCode(err) != protocol.NotFound || err.(*protocol.Error).Message != protocol.MsgRunNotFound || errDetails(err) != "" {
			t.Fatalf("%+v: %v", p, err)
		}
	}
	empty := cluster.NewFixture(cluster.Isolated)
	_, err := empty.Watch(bg, protocol.WatchParams{FromCursor: ptr("cursor-1")})
	expectCode(t, err, protocol.NotFound)
	// Superseded runs stay watchable.
	s, err := b.Watch(bg, protocol.WatchParams{RunID: ptr("run-1")})
	if err != nil || mustJSON(t, s.Result) != `{"subscriptionId":"sub-1","runId":"run-1","atCursor":"cursor-3"}` {
		t.Fatalf("%v", err)
	}
	s.Stream.Close()
}

func TestWatchOverflowClosesWithSlowConsumerAfterDraining(t *testing.T) {
	b := cluster.New(cluster.Config{QueueCapacity: 1})
	if _, err := b.Apply(bg, applyP(goldenGraph, "a", nil)); err != nil {
		t.Fatal(err)
	}
	s, err := b.Watch(bg, protocol.WatchParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stream.Close()
	if !s.TrackCursor {
		t.Fatal("watch must track the last delivered cursor")
	}
	// Capacity 1 and two live records: the one that fit is still
	// delivered, then the subscription closes.
	update(t, b, bg, "u1")
	update(t, b, bg, "u2")
	ns := nextN(t, s.Stream, 3)
	if cursors(ns[:2]) != "cursor-1,cursor-2" || ns[2].Closed != protocol.SlowConsumer {
		t.Fatalf("%s %+v", cursors(ns), ns[2])
	}
	// Other subscriptions are unaffected; a reconnect has no gap.
	expectResume(t, b, "cursor-2", "cursor-3")
}

// Over the wire: a peer that does not read gets SLOW_CONSUMER with the
// last cursor actually written, and reconnects from it without a gap.
func TestWatchSlowConsumerOverTheWireReconnectsWithoutGap(t *testing.T) {
	b := cluster.New(cluster.Config{QueueCapacity: 8})
	if _, err := b.Apply(bg, applyP(goldenGraph, "a", nil)); err != nil {
		t.Fatal(err)
	}
	// The peer deliberately stops reading while the events are written;
	// the stall detector must not cut it off first.
	w := dialWith(t, b, identity.Local(), server.Options{WriteTimeout: time.Hour})
	if got := w.call(`{"jsonrpc":"2.0","id":1,"method":"watch","params":{}}`); !strings.Contains(got, `"subscriptionId":"sub-1"`) {
		t.Fatal(got)
	}
	const n = 1500 // beyond what the writer batch, the outbox and the buffers hold (~720 frames)
	for i := range n {
		update(t, b, bg, fmt.Sprintf("u%d", i))
	}
	next := 1
	var last string
	for {
		f := w.recv()
		if strings.Contains(f, `"method":"subscription/closed"`) {
			want := fmt.Sprintf(`{"jsonrpc":"2.0","method":"subscription/closed","params":{"subscriptionId":"sub-1","reason":"SLOW_CONSUMER","lastDeliveredCursor":%q}}`, last)
			if f != want {
				t.Fatalf("closed:\n got  %s\n want %s", f, want)
			}
			break
		}
		c := fmt.Sprintf(`"cursor":"cursor-%d"`, next)
		if !strings.Contains(f, c) {
			t.Fatalf("gap: want %s in %s", c, f)
		}
		last = fmt.Sprintf("cursor-%d", next)
		next++
		if next > n+2 {
			t.Fatal("never closed")
		}
	}
	if next > n {
		t.Fatal("the slow consumer was not detected")
	}
	got := w.call(`{"jsonrpc":"2.0","id":2,"method":"watch","params":{"runId":"run-1","fromCursor":"` + last + `"}}`)
	if got != `{"jsonrpc":"2.0","id":2,"result":{"subscriptionId":"sub-2","runId":"run-1","atCursor":"cursor-1501"}}` {
		t.Fatal(got)
	}
	for ; next <= n+1; next++ {
		f := w.recv()
		if !strings.Contains(f, fmt.Sprintf(`"cursor":"cursor-%d"`, next)) {
			t.Fatalf("reconnect gap at %d: %s", next, f)
		}
	}
}

// A fault event is encoded once at commit: a live subscriber and a replay
// from an earlier cursor read the same bytes.
func TestFaultEventReplaysAndLivesUnchanged(t *testing.T) {
	b := running(t)
	s, _ := b.Watch(bg, protocol.WatchParams{})
	defer s.Stream.Close()
	nextN(t, s.Stream, 1) // the admission
	e := drive(t, b, "local")
	if err := e.crash(e.mustDispatch()); err != nil {
		t.Fatal(err)
	}
	live := nextN(t, s.Stream, 3)[2] // node_begin, node_end, fault
	want := `,"runId":"run-1","cursor":"cursor-4","event":{"type":"fault","fault":{"eventId":"crash-x1","executionRef":"run-1/worker/1","code":"aborted","consequence":"turn_failed","retry":"retryable","action":"retry","severity":"error","summary":"execution was running when the server stopped; it ends as crash","source":[{"component":"oecp-engine"}]}}`
	if string(live.Rest) != want {
		t.Fatalf("\nlive %s\nwant %s", live.Rest, want)
	}
	// Survives a fromCursor reconnect.
	s2, _ := b.Watch(bg, protocol.WatchParams{RunID: ptr("run-1"), FromCursor: ptr("cursor-3")})
	defer s2.Stream.Close()
	if n := nextN(t, s2.Stream, 1)[0]; n.Cursor != "cursor-4" || string(n.Rest) != want {
		t.Fatal(string(n.Rest))
	}
	// Invalid faults are refused.
	bad := testFault
	bad.Retry = "not_retryable"
	if _, err := cluster.EncodeFault(bad); !errors.Is(err, cluster.ErrInvalidFault) {
		t.Fatal(err)
	}
	if _, err := cluster.EncodeFault(testFault); err != nil {
		t.Fatal(err)
	}
}

func TestGetThenWatchFromCursorHasNoGapUnderConcurrentCommit(t *testing.T) {
	b := running(t)
	var wg sync.WaitGroup
	const writes = 200
	wg.Go(func() {
		for i := range writes {
			if _, err := b.Update(bg, protocol.UpdateParams{LogLevel: ptr("debug"), IfGeneration: 1, IdempotencyKey: fmt.Sprintf("u%d", i)}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	g, err := b.Get(bg, protocol.GetParams{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.Watch(bg, protocol.WatchParams{RunID: g.Status.CurrentRunID, FromCursor: g.AtCursor})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stream.Close()
	var from int
	fmt.Sscanf(*g.AtCursor, "cursor-%d", &from)
	for i := from + 1; i <= writes+1; i++ {
		n := nextN(t, s.Stream, 1)[0]
		if n.Cursor != fmt.Sprintf("cursor-%d", i) {
			t.Fatalf("got %s want cursor-%d", n.Cursor, i)
		}
	}
	testkit.Wait(t, &wg)
}

func TestLogsStreamOnlyFutureRecordsAndOverflowWithoutCursor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := cluster.New(cluster.Config{Logs: true, QueueCapacity: 2})
		l, ref := b.Ledger("test"), liveRef(b, "local")
		l.Log(ref, "t", "info", "before")
		s, err := b.Logs(bg, protocol.LogsParams{})
		if err != nil || s.MaxEventBytes != protocol.MaxNotificationBytes || s.TrackCursor {
			t.Fatal(err)
		}
		defer s.Stream.Close()
		if !blocked(t, s.Stream) {
			t.Fatal("logs replayed a past record")
		}
		for _, m := range []string{"a", "b", "c"} {
			l.Log(ref, "t", "info", m)
		}
		ns := nextN(t, s.Stream, 3)
		if string(ns[0].Rest) != `,"record":{"level":"info","target":"t","message":"a"}` || ns[1].Cursor != "" || ns[2].Closed != protocol.SlowConsumer {
			t.Fatalf("%s %+v", ns[0].Rest, ns[2])
		}
		if _, err := s.Stream.Next(bg); err == nil {
			t.Fatal("Closed was not terminal")
		}
		// Bad records are refused: a bad level, an empty target, control
		// characters.
		s2, _ := b.Logs(bg, protocol.LogsParams{})
		defer s2.Stream.Close()
		l.Log(ref, "t", "fatal", "x")
		l.Log(ref, "", "info", "x")
		l.Log(ref, "t", "info", "a\nb")
		l.Log(ref, "t", "info", "ok")
		if n := nextN(t, s2.Stream, 1)[0]; string(n.Rest) != `,"record":{"level":"info","target":"t","message":"ok"}` {
			t.Fatalf("a bad record was published: %s", n.Rest)
		}
	})
}

func TestLogsCloseWakesPendingNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := cluster.New(cluster.Config{Logs: true})
		s, _ := b.Logs(bg, protocol.LogsParams{})
		done := make(chan error, 1)
		go func() { _, err := s.Stream.Next(context.Background()); done <- err }()
		synctest.Wait()
		s.Stream.Close()
		if err := <-done; err == nil {
			t.Fatal("closed stream yielded")
		}
	})
}

func TestAgentAttachResolutionAndLiveness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := cluster.New(cluster.Config{AgentAttach: true})
		l, ref := b.Ledger("test"), liveRef(b, "local")
		_, err := b.AgentAttach(bg, protocol.AgentAttachParams{Execution: "nope"})
		if errCode(err) != protocol.NotFound || err.(*protocol.Error).Message != protocol.MsgExecNotFound || errDetails(err) != "" {
			t.Fatal(err)
		}
		l.ExecutionStarted(liveRef(b, "other"), "exec-1")
		// Another tenant's execution is indistinguishable from an unknown one.
		_, err = b.AgentAttach(bg, protocol.AgentAttachParams{Execution: "exec-1"})
		if errCode(err) != protocol.NotFound || errDetails(err) != "" {
			t.Fatal(err)
		}
		l.ExecutionStarted(ref, "exec-1")
		s, err := b.AgentAttach(bg, protocol.AgentAttachParams{Execution: "exec-1"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stream.Close()
		if !blocked(t, s.Stream) {
			t.Fatal("attach replayed")
		}
		// Output with control characters is refused.
		l.Output(ref, "exec-1", "x\ty")
		l.Output(ref, "exec-1", "ok")
		if n := nextN(t, s.Stream, 1)[0]; string(n.Rest) != `,"event":{"type":"output","text":"ok"}` {
			t.Fatal(string(n.Rest))
		}
		l.ExecutionEnded(ref, "exec-1")
		if n := nextN(t, s.Stream, 1)[0]; string(n.Rest) != `,"event":{"type":"settled"}` {
			t.Fatal(string(n.Rest))
		}
		if _, err := s.Stream.Next(bg); err == nil {
			t.Fatal("stream of an ended execution did not end")
		}
		_, err = b.AgentAttach(bg, protocol.AgentAttachParams{Execution: "exec-1"})
		if errCode(err) != protocol.Gone || err.(*protocol.Error).Message != protocol.MsgExecGone || errDetails(err) != "" {
			t.Fatal(err)
		}
	})
}

// subscription/cancel is the sole post-establishment operation: it stops
// only that subscription and the connection keeps serving.
func TestSubscriptionCancelOverTheWire(t *testing.T) {
	b := running(t)
	w := dial(t, b, identity.Local())
	if got := w.call(`{"jsonrpc":"2.0","id":1,"method":"watch","params":{}}`); !strings.Contains(got, `"sub-1"`) {
		t.Fatal(got)
	}
	if f := w.recv(); !strings.Contains(f, `"cursor":"cursor-1"`) {
		t.Fatal(f)
	}
	w.send(`{"jsonrpc":"2.0","method":"subscription/cancel","params":{"subscriptionId":"sub-1"}}`)
	got := w.call(`{"jsonrpc":"2.0","id":2,"method":"get","params":{}}`)
	if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":2,"result":{"spec":`) {
		t.Fatal(got)
	}
	// A new record reaches no cancelled subscription: the next frame is
	// the answer to the next request. (At most one event already in
	// flight may still arrive after a cancel; none does here because the
	// cancel was processed before the get was answered.)
	update(t, b, bg, "u")
	if got := w.call(`{"jsonrpc":"2.0","id":3,"method":"get","params":{"atCursor":"cursor-2"}}`); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":3,"result"`) {
		t.Fatal(got)
	}
}
