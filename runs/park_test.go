package runs_test

import (
	"context"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/server"
)

// pollUntilWaiting polls s until it has nothing ready, and returns what
// it handed over before.
func pollUntilWaiting(t *testing.T, ctx context.Context, s server.ParkingStream, wake func()) []server.Notification {
	t.Helper()
	var got []server.Notification
	for {
		batch, err := s.PollBatch(ctx, nil, 256, wake)
		if err != nil {
			t.Fatal(err)
		}
		if len(batch) == 0 {
			return got
		}
		got = append(got, batch...)
		if batch[len(batch)-1].Closed != "" {
			return got
		}
	}
}

// TestWaitingWatchIsWokenByItsRunsWrites: a run's watch on a store of
// this process waits without a goroutine (a poll returns nothing and
// arms a call), its run's next write calls it, and the events it then
// hands over are the ones that followed, up to done; a finished watch
// leaves no armed call behind.
func TestWaitingWatchIsWokenByItsRunsWrites(t *testing.T) {
	r, ctx := startRun(t, "p", "block")
	testkit.Recv(t, r.agents.started)
	sub, err := r.b.Watch(ctx, "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	ps, ok := sub.Stream.(server.ParkingStream)
	if !ok {
		t.Fatal("a run's watch is not a ParkingStream")
	}
	woke := make(chan struct{}, 1)
	wake := func() {
		select {
		case woke <- struct{}{}:
		default:
		}
	}
	ready := pollUntilWaiting(t, ctx, ps, wake)
	if len(ready) == 0 || ready[len(ready)-1].Closed != "" {
		t.Fatalf("ready before the step ends: %+v", ready)
	}
	if n := runs.ArmedCalls(r.b); n != 1 {
		t.Fatalf("a waiting watch armed %d calls", n)
	}
	close(r.agents.release)
	all := ready
	for all[len(all)-1].Closed == "" {
		testkit.Recv(t, woke)
		all = append(all, pollUntilWaiting(t, ctx, ps, wake)...)
	}
	// admitted, started, completed, terminal, done
	if len(all) != 5 || all[4].Closed != "done" {
		t.Fatalf("the watch handed over %+v", all)
	}
	for i := 1; i < 4; i++ {
		if seqOf(all[i].Cursor) <= seqOf(all[i-1].Cursor) {
			t.Fatalf("cursors out of order: %+v", all)
		}
	}
	sub.Stream.Close()
	if n := runs.ArmedCalls(r.b); n != 0 {
		t.Fatalf("%d armed calls left after the watch ended", n)
	}
}

// TestAbandonedWatchLeavesNothingArmed: a watch closed while it waits,
// and a watch or logs of a run that does not exist, leave no armed call
// behind, so idle readers of runs never written again cost nothing.
func TestAbandonedWatchLeavesNothingArmed(t *testing.T) {
	r, ctx := startRun(t, "q", "block")
	testkit.Recv(t, r.agents.started)
	for _, open := range []func() (*server.Subscription, error){
		func() (*server.Subscription, error) { return r.b.Watch(ctx, "q", nil) },
		func() (*server.Subscription, error) { return r.b.Logs(ctx, "q", nil, nil) },
	} {
		sub, err := open()
		if err != nil {
			t.Fatal(err)
		}
		pollUntilWaiting(t, ctx, sub.Stream.(server.ParkingStream), func() {})
		if n := runs.ArmedCalls(r.b); n != 1 {
			t.Fatalf("a waiting reader armed %d calls", n)
		}
		sub.Stream.Close()
		if n := runs.ArmedCalls(r.b); n != 0 {
			t.Fatalf("%d armed calls left after a waiting reader closed", n)
		}
	}
	if _, err := r.b.Watch(ctx, "nope", nil); err == nil {
		t.Fatal("a watch of no run was established")
	}
	if _, err := r.b.Logs(ctx, "nope", nil, nil); err == nil {
		t.Fatal("logs of no run were established")
	}
	if n := runs.ArmedCalls(r.b); n != 0 {
		t.Fatalf("%d armed calls left by readers of no run", n)
	}
	close(r.agents.release)
}
