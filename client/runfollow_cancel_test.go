package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/internal/testkit"
)

// TestFollowRunCancelledWhileRedialingEnds: a follower whose context ends
// while it waits to redial a dropped connection ends without an error,
// its events closed, instead of following a subscription it never opened.
func TestFollowRunCancelledWhileRedialingEnds(t *testing.T) {
	forEachBinding(t, func(t *testing.T, bd binding) {
		dial, drop := runBackend(t, bd)
		c := mustDial(t, dial)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if _, err := c.RunSubmit(ctx, client.RunSubmitParams{RunID: "f2", Submission: oneStepRun("f2", "BLOCK")}); err != nil {
			t.Fatal(err)
		}
		redialing := make(chan struct{}, 1)
		o := client.FollowOptions{RunID: "f2", Conn: c, Dial: dial,
			Backoff: func(int) time.Duration { return time.Hour },
			OnReconnect: func(error, string) {
				select {
				case redialing <- struct{}{}:
				default:
				}
			}}
		watch, err := client.FollowRunWatch(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		defer watch.Close()
		testkit.Recv(t, watch.Events())
		drop()
		// The events delivered before the drop are drained, so that the
		// follower reaches its redial.
		for waiting := true; waiting; {
			select {
			case _, ok := <-watch.Events():
				if !ok {
					t.Fatalf("the follower ended before it redialed: %v", watch.Err())
				}
			case <-redialing:
				waiting = false
			case <-time.After(testkit.HangGuard):
				t.Fatal("the follower did not redial: the test is stuck")
			}
		}
		cancel()
		for _, ok := testkit.RecvOK(t, watch.Events()); ok; _, ok = testkit.RecvOK(t, watch.Events()) {
		}
		if err := watch.Err(); err != nil {
			t.Fatalf("a follower cancelled while redialing ended with %v, want nil", err)
		}
	})
}
