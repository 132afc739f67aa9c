package runs_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
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

// checkOneStepWatch checks what a one-step run's watch handed over from
// its start: admitted, started, completed and terminal, in cursor order,
// then done.
func checkOneStepWatch(t *testing.T, all []server.Notification) {
	t.Helper()
	if len(all) != 5 || all[4].Closed != "done" {
		t.Fatalf("the watch handed over %+v", all)
	}
	for i := 1; i < 4; i++ {
		if seqOf(all[i].Cursor) <= seqOf(all[i-1].Cursor) {
			t.Fatalf("cursors out of order: %+v", all)
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
	checkOneStepWatch(t, all)
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

// foreignMemory is the memory store presented as one that other replicas
// write too and that tells their commits apart (store.ForeignWakes): the
// test says when another replica committed (kick).
type foreignMemory struct {
	sharedMemory
	mu sync.Mutex
	n  uint64
	ch chan struct{}
}

func newForeignMemory() *foreignMemory {
	return &foreignMemory{sharedMemory: sharedMemory{store.NewMemory()}, ch: make(chan struct{})}
}

func (f *foreignMemory) ForeignWakes() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *foreignMemory) ForeignChanged() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ch
}

// kick is another replica's commit.
func (f *foreignMemory) kick() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	close(f.ch)
	f.ch = make(chan struct{})
}

// chanWake is a wake function and the channel it signals, without
// blocking.
func chanWake() (func(), chan struct{}) {
	woke := make(chan struct{}, 1)
	return func() {
		select {
		case woke <- struct{}{}:
		default:
		}
	}, woke
}

// TestWaitingWatchOnASharedStoreIsWokenByAnotherReplica: a watch served
// by a replica that does not run the run waits without a goroutine too;
// the run's writes, which the other replica commits, wake it through the
// store, and it hands over every record up to done, in order. Once it
// ended nothing of it is armed, with its run or with the store.
// It runs on the memory store presented as shared (every commit wakes
// the reader) and on two PostgreSQL stores of one schema, whose
// notifications tell the reader another replica committed.
func TestWaitingWatchOnASharedStoreIsWokenByAnotherReplica(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		st := sharedMemory{store.NewMemory()}
		watchAcrossReplicas(t, st, st)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn, _ := pgtest.Schema(t)
		open := func() store.Store {
			st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}
		watchAcrossReplicas(t, open(), open())
	})
}

// watchAcrossReplicas runs a one-step run on a replica of store writer
// and checks a watch of it served by a replica of store reader that
// writes nothing (see TestWaitingWatchOnASharedStoreIsWokenByAnotherReplica).
func watchAcrossReplicas(t *testing.T, writer, reader store.Store) {
	a, b, sub := watchOnAnotherReplica(t, writer, reader)
	ps := sub.Stream.(server.ParkingStream)
	wake, woke := chanWake()
	bounded := testkit.Bounded(t)
	all := pollUntilWaiting(t, bounded, ps, wake)
	if len(all) == 0 || all[len(all)-1].Closed != "" {
		t.Fatalf("ready before the step ends: %+v", all)
	}
	if n, m := runs.ArmedCalls(b), runs.RemoteArmedCalls(b); n != 1 || m != 1 {
		t.Fatalf("a waiting watch on a shared store armed %d calls with its run, %d with the store", n, m)
	}
	close(a.agents.release)
	for all[len(all)-1].Closed == "" {
		testkit.Recv(t, woke)
		all = append(all, pollUntilWaiting(t, bounded, ps, wake)...)
		if n, m := runs.ArmedCalls(b), runs.RemoteArmedCalls(b); n > 1 || m > 1 {
			t.Fatalf("after a wake-up the watch holds %d calls with its run, %d with the store", n, m)
		}
	}
	checkOneStepWatch(t, all)
	sub.Stream.Close()
	if n, m := runs.ArmedCalls(b), runs.RemoteArmedCalls(b); n != 0 || m != 0 {
		t.Fatalf("%d calls with the run and %d with the store left after the watch ended", n, m)
	}
}

// TestSharedStoreWaitingWatchesHoldOneCallEach: on a shared store that
// tells other replicas' commits apart, each such commit wakes every
// waiting watch of a replica, and one that finds nothing new waits again
// holding one call, not one more per commit. On the replica that writes
// the run, a call fired by the run's own write leaves the store's wait at
// once. Watches that go away leave nothing armed.
func TestSharedStoreWaitingWatchesHoldOneCallEach(t *testing.T) {
	st := newForeignMemory()
	r := newRig(t, st, 0)
	reader := runs.New(runs.Config{Store: st, Agents: newFakeAgents(), Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(reader.Close)
	ctx := as("alice")
	if _, err := r.b.Submit(ctx, "x", oneStep("x", "block")); err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, r.agents.started)
	bounded := testkit.Bounded(t)
	type waiting struct {
		ps   server.ParkingStream
		wake func()
		woke chan struct{}
	}
	watch := func(b *runs.Backend) waiting {
		sub, err := b.Watch(ctx, "x", nil)
		if err != nil {
			t.Fatal(err)
		}
		w := waiting{ps: sub.Stream.(server.ParkingStream)}
		w.wake, w.woke = chanWake()
		pollUntilWaiting(t, bounded, w.ps, w.wake)
		return w
	}
	var far, near []waiting // watches of the reader, and of the run's own replica
	for range 3 {
		far, near = append(far, watch(reader)), append(near, watch(r.b))
	}
	// The reader writes nothing: only other replicas' commits wake its
	// watches.
	for round := range 5 {
		st.kick()
		for i, w := range far {
			testkit.Recv(t, w.woke)
			if got := pollUntilWaiting(t, bounded, w.ps, w.wake); len(got) != 0 {
				t.Fatalf("round %d: watch %d found %+v after a foreign commit that wrote nothing of its run", round, i, got)
			}
		}
		if n, m := runs.ArmedCalls(reader), runs.RemoteArmedCalls(reader); n != 3 || m != 3 {
			t.Fatalf("round %d: three waiting watches hold %d calls with their run, %d with the store", round, n, m)
		}
	}
	// The kicks woke the run's own replica's watches too: they wait
	// again, armed with the run and with the store. The run's own write
	// then fires their calls; none of them is left waiting for another
	// replica's commit.
	for _, w := range near {
		select {
		case <-w.woke:
		default:
		}
		pollUntilWaiting(t, bounded, w.ps, w.wake)
	}
	close(r.agents.release)
	for _, w := range near {
		testkit.Recv(t, w.woke)
	}
	if m := runs.RemoteArmedCalls(r.b); m != 0 {
		t.Fatalf("%d calls fired by their run's write still wait for another replica's commit", m)
	}
	// A watch that goes away after another replica's commit woke it,
	// before it polled again, takes back its call too.
	st.kick()
	for _, w := range far {
		testkit.Recv(t, w.woke)
	}
	for _, w := range append(far, near...) {
		w.ps.Close()
	}
	for _, b := range []*runs.Backend{reader, r.b} {
		if n, m := runs.ArmedCalls(b), runs.RemoteArmedCalls(b); n != 0 || m != 0 {
			t.Fatalf("%d calls with the run and %d with the store left after the watches ended", n, m)
		}
	}
}
