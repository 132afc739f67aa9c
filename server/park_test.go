package server_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

// parkBackend serves one watch whose stream is a ParkingStream fed by the
// test.
type parkBackend struct {
	server.EmptyBackend
	s *parkStream
}

func (b *parkBackend) Watch(context.Context, protocol.WatchParams) (*server.Subscription, error) {
	return &server.Subscription{ID: "w", Result: &protocol.SubscriptionResult{SubscriptionID: "w"}, Stream: b.s, TrackCursor: true}, nil
}

// parkStream hands out what push queued. A poll that finds nothing keeps
// its wake function for the next push and reports on parked; with
// duringPoll set, the first such poll queues those notifications and calls
// wake itself before it returns nothing, as a write that lands while a
// store read is finishing does.
type parkStream struct {
	mu         sync.Mutex
	queue      []server.Notification
	wake       func()
	next       int // the number of the next event push makes
	duringPoll []server.Notification

	parked chan struct{}
	closed chan struct{}
	closes atomic.Int32
}

func newParkStream() *parkStream {
	return &parkStream{next: 1, parked: make(chan struct{}, 4096), closed: make(chan struct{})}
}

func (s *parkStream) Next(context.Context) (server.Notification, error) {
	panic("a ParkingStream is polled")
}

func (s *parkStream) NextBatch(context.Context, []server.Notification, int) ([]server.Notification, error) {
	panic("a ParkingStream is polled")
}

func (s *parkStream) PollBatch(ctx context.Context, buf []server.Notification, max int, wake func()) ([]server.Notification, error) {
	s.mu.Lock()
	if n := min(len(s.queue), max); n > 0 {
		buf = append(buf, s.queue[:n]...)
		s.queue = s.queue[n:]
		s.mu.Unlock()
		return buf, nil
	}
	if d := s.duringPoll; d != nil {
		s.duringPoll = nil
		s.queue = append(s.queue, d...)
		s.mu.Unlock()
		wake()
		return buf, nil
	}
	s.wake = wake
	s.mu.Unlock()
	s.parked <- struct{}{}
	return buf, nil
}

func (s *parkStream) Close() {
	if s.closes.Add(1) == 1 {
		close(s.closed)
	}
}

// push queues k numbered events (and done, when set) and wakes the
// subscription if it waits.
func (s *parkStream) push(k int, done bool) {
	s.mu.Lock()
	for range k {
		s.queue = append(s.queue, ev(s.next))
		s.next++
	}
	if done {
		s.queue = append(s.queue, server.Notification{Closed: "done"})
	}
	w := s.wake
	s.wake = nil
	s.mu.Unlock()
	if w != nil {
		w()
	}
}

var _ server.ParkingStream = (*parkStream)(nil)

// expectGuarded is expect with a hang guard: a frame that never comes
// fails the test instead of hanging it.
func expectGuarded(t *testing.T, w wiretest.Wire, want string) {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		f, err := w.Recv()
		if err != nil {
			f = "recv: " + err.Error()
		}
		got <- f
	}()
	if f := testkit.Recv(t, got); f != want {
		t.Fatalf("got  %s\nwant %s", f, want)
	}
}

// pumpGoroutines counts the goroutines streaming a subscription.
func pumpGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "server.(*pump)") || strings.Contains(g, "server.(*Conn).runSubscription") {
			n++
		}
	}
	return n
}

// waitNoPump waits until no goroutine streams a subscription.
func waitNoPump(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(testkit.HangGuard) // a hang guard, not a timing assertion
	for pumpGoroutines() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a goroutine still streams a waiting subscription")
		}
		runtime.Gosched()
	}
}

const watchReq = `{"jsonrpc":"2.0","id":1,"method":"watch","params":{}}`
const watchResp = `{"jsonrpc":"2.0","id":1,"result":{"subscriptionId":"w"}}`

// eachWaitingWatch runs test once over every binding, each time with a
// watch established on a fresh parkStream and waiting for its first push.
func eachWaitingWatch(t *testing.T, test func(t *testing.T, s *parkStream, w wiretest.Wire)) {
	for _, bd := range bindings {
		t.Run(bd.name, func(t *testing.T) {
			s := newParkStream()
			w := bd.start(t, &parkBackend{s: s})
			send(t, w, watchReq)
			expectGuarded(t, w, watchResp)
			testkit.Recv(t, s.parked)
			test(t, s, w)
		})
	}
}

// A subscription whose stream has nothing ready holds no goroutine while
// it waits; a wake-up streams what is new, in order, and the close after
// it, and the subscription waits again without a goroutine in between.
func TestWaitingSubscriptionHoldsNoGoroutine(t *testing.T) {
	eachWaitingWatch(t, func(t *testing.T, s *parkStream, w wiretest.Wire) {
		waitNoPump(t)
		s.push(2, false)
		expectGuarded(t, w, evFrame(1))
		expectGuarded(t, w, evFrame(2))
		testkit.Recv(t, s.parked)
		waitNoPump(t)
		s.push(1, true)
		expectGuarded(t, w, evFrame(3))
		expectGuarded(t, w, `{"jsonrpc":"2.0","method":"subscription/closed","params":{"subscriptionId":"w","reason":"done","lastDeliveredCursor":"c3"}}`)
		testkit.Recv(t, s.closed)
		roundTrip(t, w, "after")
	})
}

// A wake-up that comes while the stream is being polled, before the poll
// returns nothing, is not lost: the stream is polled again.
func TestWakeDuringAPollIsNotLost(t *testing.T) {
	for _, bd := range bindings {
		t.Run(bd.name, func(t *testing.T) {
			s := newParkStream()
			s.duringPoll = []server.Notification{ev(1)}
			s.next = 2
			w := bd.start(t, &parkBackend{s: s})
			send(t, w, watchReq)
			expectGuarded(t, w, watchResp)
			expectGuarded(t, w, evFrame(1))
			testkit.Recv(t, s.parked)
			s.push(0, true)
			expectGuarded(t, w, `{"jsonrpc":"2.0","method":"subscription/closed","params":{"subscriptionId":"w","reason":"done","lastDeliveredCursor":"c1"}}`)
		})
	}
}

// subscription/cancel ends a waiting subscription at once: its stream is
// closed, and a later wake-up sends nothing.
func TestCancelledWaitingSubscriptionEnds(t *testing.T) {
	eachWaitingWatch(t, func(t *testing.T, s *parkStream, w wiretest.Wire) {
		waitNoPump(t)
		send(t, w, `{"jsonrpc":"2.0","method":"subscription/cancel","params":{"subscriptionId":"w"}}`)
		testkit.Recv(t, s.closed)
		s.push(1, true)
		roundTrip(t, w, "after") // no event came before the answer
		if n := s.closes.Load(); n != 1 {
			t.Fatalf("stream closed %d times", n)
		}
	})
}

// The close sequence ends a waiting subscription: its stream is closed
// and the connection finishes.
func TestCloseEndsWaitingSubscription(t *testing.T) {
	eachWaitingWatch(t, func(t *testing.T, s *parkStream, w wiretest.Wire) {
		waitNoPump(t)
		if _, err := w.CloseSend(); err != nil {
			t.Fatal(err)
		}
		testkit.Recv(t, s.closed)
	})
}

// Wake-ups from many goroutines at once start one loop at a time: every
// event is delivered once and in order.
func TestConcurrentWakesDeliverEachEventOnceInOrder(t *testing.T) {
	const pushers, each = 4, 250
	eachWaitingWatch(t, func(t *testing.T, s *parkStream, w wiretest.Wire) {
		var wg sync.WaitGroup
		for range pushers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					s.push(1, false)
				}
			}()
		}
		for i := 1; i <= pushers*each; i++ {
			expectGuarded(t, w, evFrame(i))
		}
		testkit.Wait(t, &wg)
		s.push(0, true)
		expectGuarded(t, w, fmt.Sprintf(`{"jsonrpc":"2.0","method":"subscription/closed","params":{"subscriptionId":"w","reason":"done","lastDeliveredCursor":"c%d"}}`, pushers*each))
	})
}
