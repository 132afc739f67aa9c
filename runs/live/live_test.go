package live_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs/live"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
)

// drain reads s until it closes and returns its events (the part after
// the prefix), the last one being "closed: REASON".
func drain(t *testing.T, ctx context.Context, s *live.Stream, prefix string) []string {
	t.Helper()
	var got []string
	for {
		n, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("next after %q: %v", got, err)
		}
		if n.Closed != "" {
			return append(got, "closed: "+n.Closed)
		}
		rest, ok := strings.CutPrefix(string(n.Rest), prefix)
		if !ok {
			t.Fatalf("event %s lacks the prefix %s", n.Rest, prefix)
		}
		got = append(got, rest)
	}
}

// A subscriber sees a synthesized working event, then what is published
// after it attached, settled once the execution ends, and done; the
// execution is no longer running here after its end.
func TestHubStreamsFromAttachToEnd(t *testing.T) {
	ctx := testkit.Bounded(t)
	h := live.NewHub()
	h.Publish("k", live.OutputEvent("before start")) // no window: dropped
	h.Start("k")
	h.Publish("k", live.OutputEvent("before attach"))
	s := h.Lookup("k").Follow([]byte(`,"p":`))
	h.Publish("k", live.OutputEvent("one"))
	h.Publish("k", live.OutputEvent("two"))
	h.End("k")
	h.Publish("k", live.OutputEvent("after end"))
	got := strings.Join(drain(t, ctx, s, `,"p":`), " ")
	want := `{"type":"working"} {"type":"output","text":"one"} {"type":"output","text":"two"} {"type":"settled"} closed: done`
	if got != want {
		t.Fatalf("streamed %s\nwant     %s", got, want)
	}
	if h.Lookup("k") != nil {
		t.Fatal("an ended execution is still running here")
	}
}

// A publisher never waits for a subscriber: one that falls more than the
// window behind is closed SLOW_CONSUMER, while one that attaches after
// the burst reads on from there.
func TestHubClosesASlowSubscriber(t *testing.T) {
	ctx := testkit.Bounded(t)
	h := live.NewHub()
	h.Start("k")
	slow := h.Lookup("k").Follow(nil)
	for range 1000 {
		h.Publish("k", live.OutputEvent("x"))
	}
	late := h.Lookup("k").Follow(nil)
	h.Publish("k", live.OutputEvent("last"))
	h.End("k")
	if got := drain(t, ctx, slow, ""); len(got) != 2 || got[1] != "closed: "+protocol.SlowConsumer {
		t.Fatalf("slow subscriber got %q", got)
	}
	if got := strings.Join(drain(t, ctx, late, ""), " "); got != `{"type":"working"} {"type":"output","text":"last"} {"type":"settled"} closed: done` {
		t.Fatalf("late subscriber got %s", got)
	}
}

// A subscriber waits for the next event, and gives up with its context.
func TestStreamWaitsForThePublisher(t *testing.T) {
	h := live.NewHub()
	h.Start("k")
	s := h.Lookup("k").Follow(nil)
	ctx := testkit.Bounded(t)
	if _, err := s.Next(ctx); err != nil { // working
		t.Fatal(err)
	}
	got := make(chan server.Notification, 1)
	go func() {
		n, err := s.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- n
	}()
	h.Publish("k", live.OutputEvent("late"))
	if n := testkit.Recv(t, got); string(n.Rest) != `{"type":"output","text":"late"}` {
		t.Fatalf("got %s", n.Rest)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Next(cancelled); err != context.Canceled {
		t.Fatalf("next with its context ended: %v", err)
	}
}

// bus links the stores of replicas in one process: what one broadcasts
// reaches every other one's receiver at once, unless it drops it.
type bus struct {
	mu       sync.Mutex
	replicas []*replica
}

// replica is one replica's store, shared with the others through bus.
type replica struct {
	store.Store
	bus  *bus
	recv map[string]func([]byte)
	drop func(payload []byte) bool // a message lost on the way (nil: none)
}

func (b *bus) join() *replica {
	r := &replica{Store: store.NewMemory(), bus: b, recv: map[string]func([]byte){}}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.replicas = append(b.replicas, r)
	return r
}

func (r *replica) SharedByReplicas() bool { return true }

func (r *replica) OnBroadcast(topic string, fn func([]byte)) { r.recv[topic] = fn }

func (r *replica) Broadcast(topic string, payload []byte) bool {
	if r.drop != nil && r.drop(payload) {
		return true
	}
	r.bus.mu.Lock()
	defer r.bus.mu.Unlock()
	for _, o := range r.bus.replicas {
		if fn := o.recv[topic]; o != r && fn != nil {
			fn(payload)
		}
	}
	return true
}

func never(context.Context) bool { return false }

// An execution running on one replica is followed on another through the
// relay: its output, its end, and a gap in the numbers (a message lost on
// the way) closing the subscriber SLOW_CONSUMER.
func TestRelayFollowsAnotherReplica(t *testing.T) {
	ctx := testkit.Bounded(t)
	var b bus
	sender, receiver := b.join(), b.join()
	out, in := live.NewRelay(sender), live.NewRelay(receiver)
	defer out.Stop()
	defer in.Stop()

	w := in.Follow("k", never)
	s := w.Follow(nil)
	if again := in.Follow("k", never); again != w {
		t.Fatal("a second follower of the execution got another window")
	}
	out.Send("k", live.OutputEvent("one"), false)
	out.Send("other", live.OutputEvent("nobody follows"), false)
	out.Send("k", nil, true)
	if got := strings.Join(drain(t, ctx, s, ""), " "); got != `{"type":"working"} {"type":"output","text":"one"} {"type":"settled"} closed: done` {
		t.Fatalf("followed %s", got)
	}

	gap := in.Follow("g", never).Follow(nil)
	sender.drop = func(p []byte) bool { return strings.Contains(string(p), "lost") }
	out.Send("g", live.OutputEvent("one"), false)
	for _, want := range []string{`{"type":"working"}`, `{"type":"output","text":"one"}`} {
		if n, err := gap.Next(ctx); err != nil || string(n.Rest) != want {
			t.Fatalf("before the gap: %s, %v; want %s", n.Rest, err, want)
		}
	}
	out.Send("g", live.OutputEvent("lost"), false)
	out.Send("g", live.OutputEvent("three"), false)
	if got := drain(t, ctx, gap, ""); len(got) != 1 || got[0] != "closed: "+protocol.SlowConsumer {
		t.Fatalf("after a gap: %q", got)
	}
}

// A window of an execution whose sender died ends once the store shows
// the execution ended and no end message came for a grace period; a
// store without other replicas follows nothing.
func TestRelayEndsAWindowTheStoreShowsEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b bus
		in := live.NewRelay(b.join())
		defer in.Stop()
		s := in.Follow("k", func(context.Context) bool { return true }).Follow(nil)
		got := strings.Join(drain(t, t.Context(), s, ""), " ")
		if got != `{"type":"working"} {"type":"settled"} closed: done` {
			t.Fatalf("followed %s", got)
		}
	})
	alone := live.NewRelay(store.NewMemory())
	defer alone.Stop()
	if alone.Follow("k", never) != nil {
		t.Fatal("a store without other replicas has a window of a remote execution")
	}
	alone.Send("k", live.OutputEvent("x"), false) // nothing to send to
}
