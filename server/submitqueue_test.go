package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/server"
)

// submitReq builds a run/submit request frame for runID.
func submitReq(id any, runID string) string {
	idj, _ := json.Marshal(id)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"run/submit","params":{"runId":%q,"submission":{}}}`, idj, runID)
}

func submitResp(id any, runID string) string {
	idj, _ := json.Marshal(id)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"runId":%q}}`, idj, runID)
}

// fillSubmitRunners sends MaxRunningSubmits submissions held at their
// gates (gate-0, gate-1, ...) and waits until every one has started.
func fillSubmitRunners(t *testing.T, b *scriptBackend, w wiretest.Wire) {
	t.Helper()
	for i := range server.MaxRunningSubmits {
		send(t, w, submitReq(i, fmt.Sprintf("gate-%d", i)))
	}
	for i := range server.MaxRunningSubmits {
		testkit.Recv(t, b.Started(fmt.Sprintf("gate-%d", i)))
	}
}

// TestSubmitsBeyondTheRunningBoundWaitTheirTurn: a connection runs at
// most MaxRunningSubmits run/submit handlers at once. The next submissions
// are admitted and wait, in frame order, for a handler to return; other
// methods are not held up by them.
func TestSubmitsBeyondTheRunningBoundWaitTheirTurn(t *testing.T) {
	eachBinding(t, func(t *testing.T, b *scriptBackend, w wiretest.Wire) {
		fillSubmitRunners(t, b, w)
		send(t, w, submitReq("q1", "gate-q1"), submitReq("q2", "gate-q2"))
		// The reader handled both before this get; neither has started,
		// and the get, another method, ran at once.
		roundTrip(t, w, "other")
		if isClosed(b.Started("gate-q1")) || isClosed(b.Started("gate-q2")) {
			t.Fatal("a submission beyond the bound started while every runner was busy")
		}
		b.Open("gate-0")
		expect(t, w, submitResp(0, "gate-0"))
		testkit.Recv(t, b.Started("gate-q1")) // the first queued, in frame order
		roundTrip(t, w, "again")
		if isClosed(b.Started("gate-q2")) {
			t.Fatal("the second queued submission started with no runner free")
		}
		b.Open("gate-q1")
		expect(t, w, submitResp("q1", "gate-q1"))
		testkit.Recv(t, b.Started("gate-q2"))
		b.Open("gate-q2")
		expect(t, w, submitResp("q2", "gate-q2"))
		seen := map[string]bool{}
		for i := 1; i < server.MaxRunningSubmits; i++ {
			b.Open(fmt.Sprintf("gate-%d", i))
			seen[recv(t, w)] = true
		}
		for i := 1; i < server.MaxRunningSubmits; i++ {
			if !seen[submitResp(i, fmt.Sprintf("gate-%d", i))] {
				t.Fatalf("missing the answer to submission %d", i)
			}
		}
	})
}

// TestCancelledQueuedSubmitNeverRunsAndItsIDIsReused pins the queue's
// ownership race: a $/cancelRequest for a submission still queued takes it
// out of the queue at once (its id and slot free, nothing left running),
// so a same-id retry is admitted and the runner that frees up runs the
// retry, never the cancelled request, which gets no answer.
func TestCancelledQueuedSubmitNeverRunsAndItsIDIsReused(t *testing.T) {
	b := newScript()
	w := wiretest.NewPipe(t, b, wiretest.Options{})
	fillSubmitRunners(t, b, w)
	send(t, w, submitReq("q", "gate-cancelled"), cancelReq("q"), submitReq("q", "retry"))
	roundTrip(t, w, "handled")
	// The retry holds id q and a slot, and no cancelled handler runs.
	ids, slots, cancelled := w.Conn.InFlight()
	if want := server.MaxRunningSubmits + 1; ids != want || slots != want || cancelled != 0 {
		t.Fatalf("after cancel+retry: ids=%d slots=%d cancelled=%d, want %d/%d/0", ids, slots, cancelled, want, want)
	}
	b.Open("gate-0")
	got := map[string]bool{recv(t, w): true, recv(t, w): true}
	if !got[submitResp(0, "gate-0")] || !got[submitResp("q", "retry")] {
		t.Fatalf("answers %v, want submission 0's and the retry's", got)
	}
	for i := 1; i < server.MaxRunningSubmits; i++ {
		b.Open(fmt.Sprintf("gate-%d", i))
		recv(t, w)
	}
	waitIdle(t, w, 0, 0, 0)
	if isClosed(b.Started("gate-cancelled")) {
		t.Fatal("the cancelled queued submission ran")
	}
	rest, _ := w.CloseSend()
	for _, f := range rest {
		if strings.Contains(f, "gate-cancelled") {
			t.Fatalf("answer for the cancelled submission: %s", f)
		}
	}
}

// TestCloseEndsQueuedSubmits: when the connection closes while every
// runner is held by a handler that ignores cancellation, the queued
// submissions are ended without running once the grace is over: the
// close sequence completes and no handler starts for them.
func TestCloseEndsQueuedSubmits(t *testing.T) {
	b := newScript()
	w := wiretest.NewPipe(t, b, wiretest.Options{})
	fillSubmitRunners(t, b, w)
	send(t, w, submitReq("q1", "gate-q1"), submitReq("q2", "gate-q2"))
	roundTrip(t, w, "handled")
	if _, err := w.CloseSend(); err != nil {
		t.Fatal(err)
	}
	<-w.Done()
	if isClosed(b.Started("gate-q1")) || isClosed(b.Started("gate-q2")) {
		t.Fatal("a queued submission ran after the connection closed")
	}
	// The queued submissions were ended by the close sequence itself,
	// not left for a runner that may never return: only the held
	// handlers keep their ids and slots.
	if ids, slots, _ := w.Conn.InFlight(); ids != server.MaxRunningSubmits || slots != server.MaxRunningSubmits {
		t.Fatalf("after close: ids=%d slots=%d, want %d each (the held handlers')", ids, slots, server.MaxRunningSubmits)
	}
	// The queue is empty, so the runners find nothing more to run once
	// their handlers are released (the test's leak check waits for them).
	for i := range server.MaxRunningSubmits {
		b.Open(fmt.Sprintf("gate-%d", i))
	}
}
