package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"testing"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

func forEachBinding(t *testing.T, f func(t *testing.T, bd binding)) {
	for _, bd := range bindings {
		t.Run(bd.name, func(t *testing.T) { f(t, bd) })
	}
}

func TestEmptyBackendRoundTrip(t *testing.T) {
	forEachBinding(t, func(t *testing.T, bd binding) {
		dial, _ := bd.start(t, server.EmptyBackend{})
		c := mustDial(t, dial)
		ctx := context.Background()
		init, err := c.Initialize(ctx)
		if err != nil || init.ProtocolVersion != protocol.Version || init.Status.Phase != protocol.PhaseEmpty {
			t.Fatalf("initialize = %+v, %v", init, err)
		}
		g, err := c.Get(ctx, client.GetParams{})
		if err != nil || string(g.Spec) != "null" || g.Status.Phase != protocol.PhaseEmpty {
			t.Fatalf("get = %+v, %v", g, err)
		}
		_, err = c.Plan(ctx, json.RawMessage(`{}`))
		var se *client.Error
		if !errors.As(err, &se) || se.Code != protocol.CodeApplication || se.DataCode != protocol.InvalidPhase {
			t.Fatalf("plan on the empty backend: %v", err)
		}
		// A params error carries details.
		_, err = c.Get(ctx, client.GetParams{AtCursor: "c1"})
		if !errors.As(err, &se) || se.DataCode != protocol.InvalidPhase || !se.Detail("currentCursor", new(any)) {
			t.Fatalf("get atCursor: %v", err)
		}
	})
}

func TestEveryMethod(t *testing.T) {
	forEachBinding(t, func(t *testing.T, bd binding) {
		fb := newFake()
		fb.appendEvents(evAdmission)
		dial, _ := bd.start(t, fb)
		c := mustDial(t, dial)
		ctx := context.Background()
		gen := int64(0)

		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		g, err := c.Get(ctx, client.GetParams{})
		if err != nil || g.TerminalResult == nil || string(*g.TerminalResult.Output) != `{"answer":42}` {
			t.Fatalf("get = %+v, %v", g, err)
		}
		pr, err := c.Plan(ctx, json.RawMessage(`{"profile":"p"}`))
		if err != nil || !pr.OK || string(fb.recorded("plan").(protocol.PlanParams).Graph) != `{"profile":"p"}` {
			t.Fatalf("plan = %+v, %v", pr, err)
		}
		ar, err := c.Apply(ctx, client.ApplyParams{Graph: json.RawMessage(`{}`), Input: json.RawMessage("null"), IfGeneration: &gen})
		if err != nil || *ar.RunID != "run-1" {
			t.Fatalf("apply = %+v, %v", ar, err)
		}
		ap := fb.recorded("apply").(protocol.ApplyParams)
		if !ap.HasInput || !ap.Input.IsNull() || ap.IdempotencyKey == nil || *ap.IfGeneration != 0 || ap.DryRun {
			t.Fatalf("apply params on the server: %+v", ap)
		}
		if _, err := c.Apply(ctx, client.ApplyParams{Graph: json.RawMessage(`{}`), DryRun: true}); err != nil {
			t.Fatal(err)
		}
		if ap := fb.recorded("apply").(protocol.ApplyParams); ap.HasInput || ap.IdempotencyKey != nil || !ap.DryRun {
			t.Fatalf("dry-run apply params: %+v", ap)
		}
		susp := true
		if _, err := c.Update(ctx, client.UpdateParams{Labels: map[string]string{}, Suspended: &susp, IfGeneration: 1}); err != nil {
			t.Fatal(err)
		}
		up := fb.recorded("update").(protocol.UpdateParams)
		if !up.HasLabels || len(up.Labels) != 0 || !*up.Suspended || up.LogLevel != nil || up.IdempotencyKey == "" {
			t.Fatalf("update params: %+v", up)
		}
		sr, err := c.Stop(ctx, client.StopParams{Mode: "force", IfGeneration: 1, IdempotencyKey: "k-stop"})
		if err != nil || sr.EffectiveMode != "force" || fb.recorded("stop").(protocol.StopParams).IdempotencyKey != "k-stop" {
			t.Fatalf("stop = %+v, %v", sr, err)
		}
		_, err = c.Retry(ctx, client.RetryParams{IfGeneration: 1})
		var se *client.Error
		var reason string
		if !errors.As(err, &se) || se.DataCode != protocol.NoRetryableFrontier || !se.Detail("reason", &reason) || reason != "exhausted" {
			t.Fatalf("retry: %v", err)
		}
		rr, err := c.Resubmit(ctx, client.ResubmitParams{IfGeneration: 1, IfRunID: "run-1", ReplacementInput: json.RawMessage(`{"b":1,"a":2}`)})
		if err != nil || rr.PriorRunID != "run-1" {
			t.Fatalf("resubmit = %+v, %v", rr, err)
		}
		if rp := fb.recorded("resubmit").(protocol.ResubmitParams); !rp.HasReplacement || string(rp.ReplacementInput) != `{"a":2,"b":1}` {
			t.Fatalf("resubmit params: %+v", rp)
		}
		dr, err := c.Delete(ctx, client.DeleteParams{IfGeneration: 1, IfRunID: "run-1"})
		if err != nil || !dr.Deleted || *fb.recorded("delete").(protocol.DeleteParams).IfRunID != "run-1" {
			t.Fatalf("delete = %+v, %v", dr, err)
		}

		ws, wr, err := c.Watch(ctx, client.WatchParams{RunID: "run-1"})
		if err != nil || *wr.RunID != "run-1" || ws.ID != wr.SubscriptionID {
			t.Fatalf("watch = %+v, %v", wr, err)
		}
		ev := testkit.Recv(t, ws.Events())
		if ev.Cursor != "c1" || ev.Event.Type != protocol.EventPhase || ev.Event.Admission == nil {
			t.Fatalf("watch event = %+v", ev)
		}
		_ = ws.Close()

		ls, err := c.Logs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		le := testkit.Recv(t, ls.Events())
		if le.Record.Message != "hello" || le.Record.Target != "engine" {
			t.Fatalf("log event = %+v", le)
		}
		_ = ls.Close()

		as, err := c.AgentAttach(ctx, "exec-1")
		if err != nil {
			t.Fatal(err)
		}
		a1 := testkit.Recv(t, as.Events())
		a2 := testkit.Recv(t, as.Events())
		if a1.Event.Type != "working" || a2.Event.Type != "output" || *a2.Event.Text != "hi" {
			t.Fatalf("attach events = %+v %+v", a1, a2)
		}
		_ = as.Close()
		if _, err := c.AgentAttach(ctx, "nope"); client.ErrorCode(err) != protocol.NotFound {
			t.Fatalf("attach unknown execution: %v", err)
		}

		// Raw calls keep the bytes.
		var raw json.RawMessage
		if err := c.Call(ctx, "get", map[string]any{}, &raw); err != nil || len(raw) == 0 {
			t.Fatalf("raw get: %s %v", raw, err)
		}
		if err := c.Call(ctx, "no/such", nil, nil); !isCode(err, protocol.CodeMethodNotFound) {
			t.Fatalf("unknown method: %v", err)
		}
	})
}

func isCode(err error, code int) bool {
	var se *client.Error
	return errors.As(err, &se) && se.Code == code
}

// TestCancelSendsCancelRequest: a cancelled call returns at once, the
// backend sees its context cancelled (the server got $/cancelRequest), and
// the connection stays usable.
func TestCancelSendsCancelRequest(t *testing.T) {
	forEachBinding(t, func(t *testing.T, bd binding) {
		fb := newFake()
		fb.getGate = true
		dial, _ := bd.start(t, fb)
		c := mustDial(t, dial)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := c.Get(ctx, client.GetParams{})
			errc <- err
		}()
		testkit.Recv(t, fb.getStarted)
		cancel()
		if err := testkit.Recv(t, errc); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled get returned %v", err)
		}
		testkit.Recv(t, fb.getCancelled) // the server cancelled the handler
		if _, err := c.Initialize(context.Background()); err != nil {
			t.Fatalf("connection unusable after cancel: %v", err)
		}
	})
}

// TestSubscriptionCloseCancelsOnServer: closing a subscription sends
// subscription/cancel, and the server closes the stream.
func TestSubscriptionCloseCancelsOnServer(t *testing.T) {
	forEachBinding(t, func(t *testing.T, bd binding) {
		fb := newFake()
		fb.appendEvents(evAdmission, evBegin)
		dial, _ := bd.start(t, fb)
		c := mustDial(t, dial)
		sub, res, err := c.Watch(context.Background(), client.WatchParams{})
		if err != nil || *res.AtCursor != "c2" {
			t.Fatalf("watch: %+v %v", res, err)
		}
		for _, want := range []string{"c1", "c2"} {
			ev := testkit.Recv(t, sub.Events())
			if ev.Cursor != want || ev.SubscriptionID != sub.ID || ev.RunID != "run-1" {
				t.Fatalf("event %+v, want cursor %s", ev, want)
			}
		}
		_ = sub.Close()
		if id := testkit.Recv(t, fb.streamClosed); id != sub.ID {
			t.Fatalf("server closed stream %s, want %s", id, sub.ID)
		}
		if _, ok := testkit.RecvOK(t, sub.Events()); ok {
			t.Fatal("events still open after Close")
		}
		if sub.Err() != nil {
			t.Fatalf("Err after Close = %v", sub.Err())
		}
	})
}

// TestServerSlowConsumerClose surfaces subscription/closed as ClosedError
// with the last delivered cursor.
func TestServerSlowConsumerClose(t *testing.T) {
	forEachBinding(t, func(t *testing.T, bd binding) {
		fb := newFake()
		fb.slowAfter = "c2"
		fb.appendEvents(evAdmission, evBegin, evEnd)
		dial, _ := bd.start(t, fb)
		c := mustDial(t, dial)
		sub, _, err := c.Watch(context.Background(), client.WatchParams{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for ev, ok := testkit.RecvOK(t, sub.Events()); ok; ev, ok = testkit.RecvOK(t, sub.Events()) {
			got = append(got, ev.Cursor)
		}
		var ce *client.ClosedError
		if !errors.As(sub.Err(), &ce) || ce.Reason != protocol.SlowConsumer || ce.LastDeliveredCursor != "c2" || ce.Local {
			t.Fatalf("Err = %#v", sub.Err())
		}
		if !reflect.DeepEqual(got, []string{"c1", "c2"}) {
			t.Fatalf("events %v", got)
		}
	})
}

// TestLocalSlowConsumer: a consumer that does not drain loses the
// subscription without blocking unary calls on the connection.
func TestLocalSlowConsumer(t *testing.T) {
	fb := newFake()
	fb.appendEvents(evAdmission, evBegin, evEnd, evBookmark)
	dial, _ := startWS(t, fb)
	c := mustDialWith(t, dial, 1) // room for one unread event
	sub, _, err := c.Watch(context.Background(), client.WatchParams{})
	if err != nil {
		t.Fatal(err)
	}
	// Unary calls still answer while the subscription is unread.
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if id := testkit.Recv(t, fb.streamClosed); id != sub.ID {
		t.Fatalf("stream %s closed, want %s", id, sub.ID)
	}
	var got []string
	for ev, ok := testkit.RecvOK(t, sub.Events()); ok; ev, ok = testkit.RecvOK(t, sub.Events()) {
		got = append(got, ev.Cursor)
	}
	var ce *client.ClosedError
	if !errors.As(sub.Err(), &ce) || !ce.Local || ce.Reason != protocol.SlowConsumer || ce.LastDeliveredCursor != "c1" || len(got) != 1 {
		t.Fatalf("events %v, Err %#v", got, sub.Err())
	}
}

// mustDialWith dials the latest WebSocket test server with a custom
// subscription buffer.
func mustDialWith(t *testing.T, _ client.Dialer, buf int) *client.Conn {
	t.Helper()
	c, err := client.Dial(context.Background(), lastWSURL, client.DialOptions{AllowPlaintext: true, Conn: client.Options{SubscriptionBuffer: buf}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestCallAfterCloseFails(t *testing.T) {
	dial, _ := startWS(t, server.EmptyBackend{})
	c := mustDial(t, dial)
	_ = c.Close()
	if _, err := c.Initialize(context.Background()); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("call after close: %v", err)
	}
	testkit.Recv(t, c.Done())
}

// TestConnectionDropFailsPendingAndSubscriptions: when the server goes
// away, pending calls fail and subscriptions end with the connection error.
func TestConnectionDropFailsPendingAndSubscriptions(t *testing.T) {
	forEachBinding(t, func(t *testing.T, bd binding) {
		fb := newFake()
		fb.getGate = true
		fb.appendEvents(evAdmission)
		dial, drop := bd.start(t, fb)
		c := mustDial(t, dial)
		sub, _, err := c.Watch(context.Background(), client.WatchParams{})
		if err != nil {
			t.Fatal(err)
		}
		testkit.Recv(t, sub.Events())
		errc := make(chan error, 1)
		go func() { _, err := c.Get(context.Background(), client.GetParams{}); errc <- err }()
		testkit.Recv(t, fb.getStarted)
		drop()
		if err := testkit.Recv(t, errc); err == nil || client.ErrorCode(err) != "" {
			t.Fatalf("pending call after drop: %v", err)
		}
		for _, ok := testkit.RecvOK(t, sub.Events()); ok; _, ok = testkit.RecvOK(t, sub.Events()) {
		}
		if sub.Err() == nil {
			t.Fatal("subscription ended without error after drop")
		}
		testkit.Recv(t, c.Done())
	})
}

func TestDialCommand(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "OECP_CLIENT_TEST_SERVE=1")
	c, err := client.DialCommand(cmd, nil, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Initialize(context.Background())
	if err != nil || r.Status.Phase != protocol.PhaseEmpty {
		t.Fatalf("initialize over a spawned server: %+v %v", r, err)
	}
	if _, err := c.Plan(context.Background(), json.RawMessage(`{}`)); client.ErrorCode(err) != protocol.InvalidPhase {
		t.Fatalf("plan: %v", err)
	}
	_ = c.Close()
	if cmd.ProcessState == nil {
		t.Fatal("the server process was not waited for")
	}
}
