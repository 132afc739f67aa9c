package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/internal/wiretest"
)

// waitIdle waits until the connection has no in-flight ids, no used slots
// and no cancelled handler still running, by polling after each round trip
// (each round trip yields to the server's goroutines; no timing involved).
func waitIdle(t *testing.T, w *wiretest.PipeWire, wantIDs, wantSlots, wantCancelled int) {
	t.Helper()
	for i := 0; ; i++ {
		ids, slots, cancelled := w.Conn.InFlight()
		if ids == wantIDs && slots == wantSlots && cancelled == wantCancelled {
			return
		}
		if i > 10000 {
			t.Fatalf("in flight: ids=%d slots=%d cancelled=%d, want %d/%d/%d", ids, slots, cancelled, wantIDs, wantSlots, wantCancelled)
		}
		roundTrip(t, w, fmt.Sprintf("probe-%d", i))
	}
}

// TestCancelReleasesIDSoSameIDRetryIsAdmitted pins historical race (a): a
// cancel that leaves the id in flight. The cancelled handler here ignores
// its context and is still running when the retry arrives, so only the
// reader's synchronous release of id and slot lets the retry in.
func TestCancelReleasesIDSoSameIDRetryIsAdmitted(t *testing.T) {
	b := newScript()
	w := wiretest.NewPipe(t, b, wiretest.Options{})
	send(t, w, getReq(1, "gate:a"))
	testkit.Recv(t, b.Started("gate:a"))
	send(t, w, cancelReq(1), getReq(1, ""))
	expect(t, w, getResp(1)) // not DUPLICATE_REQUEST_ID
	ids, slots, cancelled := w.Conn.InFlight()
	if ids != 0 || slots != 0 || cancelled != 1 {
		t.Fatalf("after cancel+retry: ids=%d slots=%d cancelled=%d, want 0/0/1", ids, slots, cancelled)
	}
	b.Open("gate:a")
	testkit.Recv(t, b.Cancelled("gate:a")) // the handler's context was cancelled
	waitIdle(t, w, 0, 0, 0)
	// The late result of the cancelled request is dropped: nothing but the
	// probe answers arrives, and nothing for id 1 is left at close.
	rest, _ := w.CloseSend()
	for _, f := range rest {
		if strings.Contains(f, `"id":1,`) {
			t.Fatalf("late response for cancelled request: %s", f)
		}
	}
}

// TestFastCompletionLeavesNoStaleCancelHandle pins historical race (b): a
// task that finishes before its cancel handle is registered leaves a stale
// handle behind, and the next same-id request is refused as a duplicate.
// Registration happens under the table lock before the goroutine starts.
func TestFastCompletionLeavesNoStaleCancelHandle(t *testing.T) {
	b := newScript()
	w := wiretest.NewPipe(t, b, wiretest.Options{})
	for i := 0; i < 2000; i++ {
		send(t, w, getReq(7, ""))
		expect(t, w, getResp(7))
	}
	// Each response is queued only after the id was released, so the table
	// is empty now without waiting.
	if ids, _, _ := w.Conn.InFlight(); ids != 0 {
		t.Fatalf("stale in-flight ids: %d", ids)
	}
	// A cancel for the finished id is a silent no-op.
	send(t, w, cancelReq(7))
	roundTrip(t, w, "sync")
}

// TestCancelThenSameIDRetryKeepsNewCancelHandle pins historical race (c):
// request X is cancelled, a new X is admitted, then the old X's cleanup
// runs. The old cleanup must not delete the new X's entry, so a later
// $/cancelRequest for the new X still takes effect.
func TestCancelThenSameIDRetryKeepsNewCancelHandle(t *testing.T) {
	b := newScript()
	w := wiretest.NewPipe(t, b, wiretest.Options{})
	send(t, w, getReq("x", "gate:old"))
	testkit.Recv(t, b.Started("gate:old"))
	send(t, w, cancelReq("x"), getReq("x", "gate:new"))
	testkit.Recv(t, b.Started("gate:new"))
	// The old handler finishes now and runs its cleanup while the new X is
	// in flight under the same id.
	b.Open("gate:old")
	waitIdle(t, w, 1, 1, 0)
	// The new X is still cancellable.
	send(t, w, cancelReq("x"))
	roundTrip(t, w, "sync")
	if ids, slots, cancelled := w.Conn.InFlight(); ids != 0 || slots != 0 || cancelled != 1 {
		t.Fatalf("after cancelling new x: ids=%d slots=%d cancelled=%d, want 0/0/1", ids, slots, cancelled)
	}
	b.Open("gate:new")
	testkit.Recv(t, b.Cancelled("gate:new"))
	waitIdle(t, w, 0, 0, 0)
	// A third X completes normally; neither cancelled X ever answers.
	send(t, w, getReq("x", ""))
	expect(t, w, getResp("x"))
	rest, _ := w.CloseSend()
	if len(rest) != 0 {
		t.Fatalf("unexpected frames after close: %q", rest)
	}
}

// TestCompletionThenSameIDRetryKeepsNewCancelHandle is race (c) after a
// completion instead of a cancel.
func TestCompletionThenSameIDRetryKeepsNewCancelHandle(t *testing.T) {
	b := newScript()
	w := wiretest.NewPipe(t, b, wiretest.Options{})
	send(t, w, getReq("x", ""))
	expect(t, w, getResp("x"))
	send(t, w, getReq("x", "block:new"))
	testkit.Recv(t, b.Started("block:new"))
	send(t, w, cancelReq("x"))
	testkit.Recv(t, b.Cancelled("block:new"))
	waitIdle(t, w, 0, 0, 0)
	rest, _ := w.CloseSend()
	if len(rest) != 0 {
		t.Fatalf("cancelled request answered: %q", rest)
	}
}

// TestCancelledRequestIsIndependentlyCancellableAfterReuse mirrors the
// reference's wire check over both bindings: cancel A(1), reuse as B(1)
// and cancel B, reuse as C(1) which completes; only C answers.
func TestCancelledRequestIsIndependentlyCancellableAfterReuse(t *testing.T) {
	eachBinding(t, func(t *testing.T, b *scriptBackend, w wiretest.Wire) {
		send(t, w, getReq(1, "block:a"))
		testkit.Recv(t, b.Started("block:a"))
		send(t, w, cancelReq(1), getReq(1, "block:b"))
		testkit.Recv(t, b.Cancelled("block:a"))
		testkit.Recv(t, b.Started("block:b"))
		send(t, w, cancelReq(1))
		testkit.Recv(t, b.Cancelled("block:b"))
		send(t, w, getReq(1, ""))
		expect(t, w, getResp(1))
	})
}

// TestCancelRequestWithExtraTopLevelMemberStillCancels; a top-level id on
// the notification is ignored (and never answered).
func TestCancelRequestWithExtraTopLevelMemberStillCancels(t *testing.T) {
	eachBinding(t, func(t *testing.T, b *scriptBackend, w wiretest.Wire) {
		send(t, w, getReq(1, "block:a"))
		testkit.Recv(t, b.Started("block:a"))
		send(t, w, `{"jsonrpc":"2.0","id":7,"method":"$/cancelRequest","params":{"id":1},"extra":true}`)
		testkit.Recv(t, b.Cancelled("block:a"))
		roundTrip(t, w, "sync") // neither id 1 nor id 7 answered before it
	})
}

// TestDuplicateCancelKeysCancelNothing: a malformed cancel is an Invalid
// Request and the gated requests still complete.
func TestDuplicateCancelKeysCancelNothing(t *testing.T) {
	b := newScript()
	w := wiretest.NewPipe(t, b, wiretest.Options{})
	send(t, w, getReq(1, "gate:a"), getReq(2, "gate:b"))
	testkit.Recv(t, b.Started("gate:a"))
	testkit.Recv(t, b.Started("gate:b"))
	send(t, w, `{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1,"id":2}}`)
	expect(t, w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}`)
	b.Open("gate:a")
	expect(t, w, getResp(1))
	b.Open("gate:b")
	expect(t, w, getResp(2))
}

// TestPipelinedCancelReuseBurst: thousands of pipelined cancel/reuse
// cycles on one id never see DUPLICATE_REQUEST_ID or SERVER_BUSY, and no
// cancelled request answers.
func TestPipelinedCancelReuseBurst(t *testing.T) {
	eachBinding(t, func(t *testing.T, b *scriptBackend, w wiretest.Wire) {
		const cycles = 3000
		done := make(chan []string)
		go func() {
			var got []string
			for {
				f, err := w.Recv()
				if err != nil {
					break
				}
				got = append(got, f)
				if strings.Contains(f, `"id":"final"`) {
					break
				}
			}
			done <- got
		}()
		for i := 0; i < cycles; i++ {
			tag := fmt.Sprintf("block:%d", i)
			if err := w.Send(getReq(1, tag)); err != nil {
				t.Fatal(err)
			}
			if err := w.Send(cancelReq(1)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Send(getReq("final", "")); err != nil {
			t.Fatal(err)
		}
		got := testkit.Recv(t, done)
		if len(got) != 1 || got[0] != getResp("final") {
			t.Fatalf("got %d frames before the final answer; first: %.200q", len(got), got)
		}
	})
}

// TestCancelsFlowWhileThePeerDoesNotRead: the reader never writes to the
// peer itself, so a peer that stopped reading cannot stall the processing
// of its own frames: here its first answer (a parse error) cannot be
// written, and still a later request is dispatched and its cancel reaches
// the handler.
func TestCancelsFlowWhileThePeerDoesNotRead(t *testing.T) {
	b := newScript()
	w := wiretest.NewPipe(t, b, wiretest.Options{})
	// The output pipe is never read from here on: this answer blocks the
	// writer.
	send(t, w, `{`)
	send(t, w, getReq(1, "block:a"))
	testkit.Recv(t, b.Started("block:a"))
	send(t, w, cancelReq(1))
	testkit.Recv(t, b.Cancelled("block:a"))
}
