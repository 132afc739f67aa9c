package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
)

// countingStore counts the event reads of its read transactions.
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (s *countingStore) View(ctx context.Context, fn func(store.ReadTx) error) error {
	return s.Store.View(ctx, func(tx store.ReadTx) error { return fn(countingTx{tx, &s.reads}) })
}

type countingTx struct {
	store.ReadTx
	reads *atomic.Int64
}

func (t countingTx) Events(tenant, runID string, after uint64, limit int) ([]store.Event, error) {
	t.reads.Add(1)
	return t.ReadTx.Events(tenant, runID, after, limit)
}

// watchCurrent watches the current run; the stream is closed when the
// test ends.
func watchCurrent(t *testing.T, b *cluster.Backend) *server.Subscription {
	t.Helper()
	s, err := b.Watch(bg, protocol.WatchParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stream.Close)
	return s
}

// follow delivers every notification of s on a channel until s ends or
// ctx is done.
func follow(ctx context.Context, s server.Stream) <-chan server.Notification {
	ch := make(chan server.Notification, 4096)
	go func() {
		defer close(ch)
		for {
			n, err := s.Next(ctx)
			if err != nil {
				return
			}
			ch <- n
		}
	}()
	return ch
}

func wantCursor(t *testing.T, who string, n server.Notification, seq int) {
	t.Helper()
	c := fmt.Sprintf("cursor-%d", seq)
	if n.Cursor != c || !strings.Contains(string(n.Rest), `"cursor":"`+c+`"`) {
		t.Fatalf("%s: got %s (%s), want %s", who, n.Cursor, n.Rest, c)
	}
}

// Caught-up watchers of a run are woken once per commit and the commit is
// read from the store once for all of them.
func TestWatchersOfARunShareOneStoreReadPerCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &countingStore{Store: store.NewMemory()}
		b := cluster.New(cluster.Config{Store: st})
		if _, err := b.Apply(bg, applyP(goldenGraph, "a", nil)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		const subs = 50
		chans := make([]<-chan server.Notification, subs)
		for i := range chans {
			s := watchCurrent(t, b)
			chans[i] = follow(ctx, s.Stream)
			wantCursor(t, "admission", <-chans[i], 1)
		}
		synctest.Wait()
		for k := 2; k <= 4; k++ {
			st.reads.Store(0)
			update(t, b, bg, fmt.Sprintf("u%d", k))
			for i, ch := range chans {
				wantCursor(t, fmt.Sprintf("watcher %d", i), <-ch, k)
			}
			synctest.Wait()
			if n := st.reads.Load(); n != 1 {
				t.Fatalf("commit %d: %d event reads for %d watchers, want 1", k, n, subs)
			}
		}
		cancel()
		synctest.Wait()
	})
}

// Watchers starting at many cursors, one of them pausing far behind the
// feed's window while the others keep up, each get exactly the run's
// events after their cursor, in order.
func TestWatchersAtManyCursorsGetExactlyTheirEventsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := cluster.NewFixture(cluster.Isolated)
		b.SetFeedWindow(8) // reads of 8 events, trimmed past 16: every path runs
		if _, err := b.Apply(bg, applyP(goldenGraph, "a", nil)); err != nil {
			t.Fatal(err)
		}
		const history, live = 40, 200
		for i := range history {
			update(t, b, bg, fmt.Sprintf("h%d", i))
		}
		last := 1 + history + live
		starts := []int{0, 1, 7, 20, 33, history, history + 1, history + 1}
		var (
			mu       sync.Mutex
			cond     = sync.NewCond(&mu)
			progress = make([]int, len(starts))
			lagging  = len(starts) - 1 // pauses after the first live event
			release  = make(chan struct{})
			wg       sync.WaitGroup
		)
		for i, from := range starts {
			p := protocol.WatchParams{RunID: ptr("run-1")}
			if from > 0 {
				p.FromCursor = ptr(fmt.Sprintf("cursor-%d", from))
			}
			s, err := b.Watch(bg, p)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stream.Close()
			wg.Go(func() {
				for seq := from + 1; seq <= last; seq++ {
					if i == lagging && seq == from+2 {
						<-release
					}
					n, err := s.Stream.Next(bg)
					if err != nil {
						t.Errorf("watcher %d: %v", i, err)
						return
					}
					wantCursor(t, fmt.Sprintf("watcher %d from %d", i, from), n, seq)
					mu.Lock()
					progress[i] = seq
					mu.Unlock()
					cond.Broadcast()
				}
			})
		}
		synctest.Wait() // every watcher has caught up and follows the feed
		for k := 1; k <= live; k++ {
			update(t, b, bg, fmt.Sprintf("l%d", k))
			// Within the slow-consumer bound of every watcher; the lagging
			// one, once it has its first live event, stays under it.
			mu.Lock()
			for !t.Failed() && (slowestBut(progress, lagging) < 1+history+k-32 || progress[lagging] < history+2) {
				cond.Wait()
			}
			mu.Unlock()
		}
		close(release)
		wg.Wait()
	})
}

func slowestBut(done []int, skip int) int {
	m := int(^uint(0) >> 1)
	for i, d := range done {
		if i != skip {
			m = min(m, d)
		}
	}
	return m
}

// A watcher that stops reading neither holds up the others nor costs them
// an event; it drains the capacity's worth it was owed, closes with
// SLOW_CONSUMER, and resumes from its last cursor without a gap.
func TestStalledWatcherLeavesTheOthersWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const capacity, live = 8, 30
		b := cluster.New(cluster.Config{QueueCapacity: capacity})
		if _, err := b.Apply(bg, applyP(goldenGraph, "a", nil)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var active []<-chan server.Notification
		for range 3 {
			s := watchCurrent(t, b)
			ch := follow(ctx, s.Stream)
			wantCursor(t, "admission", <-ch, 1)
			active = append(active, ch)
		}
		stalled := watchCurrent(t, b)
		// It follows the feed, receives the first live event, then stops.
		first := make(chan server.Notification, 2)
		go func() {
			for range 2 {
				n, _ := stalled.Stream.Next(ctx)
				first <- n
			}
		}()
		wantCursor(t, "stalled admission", <-first, 1)
		synctest.Wait()
		for k := 2; k <= live+1; k++ {
			update(t, b, bg, fmt.Sprintf("u%d", k))
			for i, ch := range active {
				wantCursor(t, fmt.Sprintf("active %d", i), <-ch, k)
			}
			if k == 2 {
				wantCursor(t, "stalled", <-first, 2)
			}
		}
		// Position cursor-2: it is owed cursor-3 .. cursor-(2+capacity).
		ns := nextN(t, stalled.Stream, capacity+1)
		for i, n := range ns[:capacity] {
			wantCursor(t, "stalled drain", n, 3+i)
		}
		if ns[capacity].Closed != protocol.SlowConsumer {
			t.Fatalf("after the drain: %+v", ns[capacity])
		}
		expectResume(t, b, fmt.Sprintf("cursor-%d", 2+capacity), fmt.Sprintf("cursor-%d", 3+capacity))
		cancel()
		synctest.Wait()
	})
}

// The watcher waiting on the store's commit signal for the others can
// leave (its request cancelled); another takes its place, and the next
// commit still reaches everyone.
func TestWatchersOutliveTheOneThatWaitedForCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := running(t)
		var subs []*server.Subscription
		for range 3 {
			s := watchCurrent(t, b)
			wantCursor(t, "admission", nextN(t, s.Stream, 1)[0], 1)
			subs = append(subs, s)
		}
		first, leave := context.WithCancel(context.Background())
		left := make(chan error, 1)
		go func() {
			_, err := subs[0].Stream.Next(first)
			left <- err
		}()
		synctest.Wait() // subs[0] joined first: it waits on the store
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rest := []<-chan server.Notification{follow(ctx, subs[1].Stream), follow(ctx, subs[2].Stream)}
		synctest.Wait()
		leave()
		if err := <-left; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Next: %v", err)
		}
		synctest.Wait()
		update(t, b, bg, "u")
		for i, ch := range rest {
			wantCursor(t, fmt.Sprintf("watcher %d", i+1), <-ch, 2)
		}
		// The one that left resumes where it was.
		wantCursor(t, "returning", nextN(t, subs[0].Stream, 1)[0], 2)
		cancel()
		synctest.Wait()
	})
}

// A watcher that resumes from an old cursor, long after the feed's window
// moved on, gets the history and then the live events.
func TestLateWatcherGetsHistoryThenLive(t *testing.T) {
	b := running(t)
	b.SetFeedWindow(4)
	live := watchCurrent(t, b)
	wantCursor(t, "live admission", nextN(t, live.Stream, 1)[0], 1)
	for k := 2; k <= 30; k++ {
		update(t, b, bg, fmt.Sprintf("u%d", k))
		wantCursor(t, "live", nextN(t, live.Stream, 1)[0], k)
	}
	late, err := b.Watch(bg, protocol.WatchParams{RunID: ptr("run-1"), FromCursor: ptr("cursor-2")})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Stream.Close()
	for k, n := range nextN(t, late.Stream, 28) {
		wantCursor(t, "late history", n, 3+k)
	}
	update(t, b, bg, "u31")
	wantCursor(t, "late live", nextN(t, late.Stream, 1)[0], 31)
	wantCursor(t, "live", nextN(t, live.Stream, 1)[0], 31)
}

// Deleting the cluster ends every watcher of the run, after the same
// events.
func TestDeleteEndsEveryWatcherOfTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := running(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var chans []<-chan server.Notification
		for range 4 {
			s := watchCurrent(t, b)
			chans = append(chans, follow(ctx, s.Stream))
		}
		synctest.Wait()
		if _, err := b.Stop(bg, protocol.StopParams{Mode: "drain", IfGeneration: 1, IdempotencyKey: "s"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // every watcher has the stop's events
		if _, err := b.Delete(bg, protocol.DeleteParams{IfGeneration: 1, IfRunID: ptr("run-1"), IdempotencyKey: "d"}); err != nil {
			t.Fatal(err)
		}
		var want string
		for i, ch := range chans {
			var got []server.Notification
			for n := range ch {
				got = append(got, n)
			}
			if i == 0 {
				want = cursors(got)
			} else if cursors(got) != want {
				t.Fatalf("watcher %d saw %s, watcher 0 %s", i, cursors(got), want)
			}
		}
	})
}

// A watcher that reads in bursts falls behind the feed's window by every
// amount in turn, and still misses nothing.
func TestWatcherBehindTheWindowByAnyAmountMissesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := running(t)
		b.SetFeedWindow(4) // kept 4, trimmed past 8
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		lead := watchCurrent(t, b)
		burst := watchCurrent(t, b)
		leads := follow(ctx, lead.Stream)
		wantCursor(t, "lead", <-leads, 1)
		wantCursor(t, "burst", nextN(t, burst.Stream, 1)[0], 1)
		// Its next read waits: it follows the feed from then on.
		first := make(chan server.Notification, 1)
		go func() {
			n, _ := burst.Stream.Next(ctx)
			first <- n
		}()
		synctest.Wait()
		at := 1
		for k := 2; k <= 120; k++ {
			update(t, b, bg, fmt.Sprintf("u%d", k))
			wantCursor(t, "lead", <-leads, k)
			if k == 2 {
				wantCursor(t, "burst", <-first, 2)
				at = 2
			}
			synctest.Wait()
			if k%7 != 0 && k%11 != 0 && k%13 != 0 {
				continue
			}
			for _, n := range nextN(t, burst.Stream, k-at) {
				at++
				wantCursor(t, "burst", n, at)
			}
		}
		cancel()
	})
}

// TestALeftWatchRoleIsTakenUp: a watcher woken by a commit while another
// watcher already read the feed for everyone leaves the watch role with
// no read of its own to do; it must wake the waiters so that one of them
// watches the next commit, or a caught-up watcher would sleep through it.
func TestALeftWatchRoleIsTakenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := running(t)
		x, d, e := watchCurrent(t, b), watchCurrent(t, b), watchCurrent(t, b)
		for _, s := range []*server.Subscription{x, d, e} {
			wantCursor(t, "admission", nextN(t, s.Stream, 1)[0], 1)
		}
		// x opens the run's feed and leaves it.
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _, _ = x.Stream.Next(ctx) }()
		synctest.Wait()
		cancel()
		synctest.Wait()
		release := b.HoldWatchRole() // woken by the next commit, not yet back
		update(t, b, bg, "u2")
		wantCursor(t, "d", nextN(t, d.Stream, 1)[0], 2) // d reads for everyone
		wantCursor(t, "e", nextN(t, e.Stream, 1)[0], 2)
		got := make(chan server.Notification, 1)
		go func() { n, _ := e.Stream.Next(context.Background()); got <- n }()
		synctest.Wait() // e waits for the watcher's read
		release()
		update(t, b, bg, "u3")
		synctest.Wait()
		select {
		case n := <-got:
			wantCursor(t, "e", n, 3)
		default:
			t.Fatal("a caught-up watcher slept through a commit: nobody watched it")
		}
		for _, s := range []*server.Subscription{x, d, e} {
			s.Stream.Close()
		}
	})
}
