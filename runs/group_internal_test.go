package runs

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/runs/logbuf"
	"github.com/oecp/oecp/store"
)

// countingStore counts the transactions that committed, and fails the
// commit of the next failCommits multi-write transactions after their
// callback succeeded (what the callback wrote is then rolled back).
type countingStore struct {
	store.Store
	commits     atomic.Int32
	failCommits atomic.Int32
}

var errCommitFailed = errors.New("test: commit failed")

func (s *countingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	writes := 0
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		writes = 0
		if err := fn(countTx{tx, &writes}); err != nil {
			return err
		}
		if writes > 1 && s.failCommits.Load() > 0 {
			s.failCommits.Add(-1)
			return errCommitFailed
		}
		return nil
	})
	if err == nil {
		s.commits.Add(1)
	}
	return err
}

type countTx struct {
	store.Tx
	writes *int
}

func (t countTx) PutCluster(key string, c store.Cluster) error {
	*t.writes++
	return t.Tx.PutCluster(key, c)
}

// batch queues the changes behind a leader that holds its transaction
// until all of them are queued, so that they are applied as one batch,
// and returns each change's outcome.
func batch(t *testing.T, b *Backend, changes ...func(store.Tx) error) []error {
	t.Helper()
	entered, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := b.commit(context.Background(), runKey{}, func(tx store.Tx, _ []logbuf.Line) error {
			close(entered)
			<-release
			return tx.PutCluster("leader", store.Cluster{Version: 1, Data: []byte("{}")})
		})
		if err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-entered:
	case <-time.After(2 * time.Minute): // a hang guard, no timing assertion
		t.Fatal("the first commit never started")
	}
	errs := make([]error, len(changes))
	for i, fn := range changes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.commit(context.Background(), runKey{}, func(tx store.Tx, _ []logbuf.Line) error { return fn(tx) })
		}()
		waitQueued(b, i+1) // queue order is the order of changes
	}
	close(release)
	testkit.Wait(t, &wg)
	return errs
}

// waitQueued returns once n changes wait for a commit.
func waitQueued(b *Backend, n int) {
	for {
		b.group.mu.Lock()
		q := len(b.group.queue)
		b.group.mu.Unlock()
		if q >= n {
			return
		}
		runtime.Gosched()
	}
}

func put(key string) func(store.Tx) error {
	return func(tx store.Tx) error { return tx.PutCluster(key, store.Cluster{Version: 1, Data: []byte("{}")}) }
}

func keys(t *testing.T, st store.Store, names ...string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := st.View(context.Background(), func(tx store.ReadTx) error {
		for _, k := range names {
			_, ok, err := tx.Cluster(k)
			if err != nil {
				return err
			}
			out[k] = ok
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGroupCommitFailedChangeKeepsItsBatchMates: of three changes
// applied as one batch, the middle one fails after writing: the other
// two commit together in one transaction, the failing one gets its own
// error and nothing it wrote is kept.
func TestGroupCommitFailedChangeKeepsItsBatchMates(t *testing.T) {
	st := &countingStore{Store: store.NewMemory()}
	b := New(Config{Store: st})
	boom := errors.New("boom")
	errs := batch(t, b, put("a"), func(tx store.Tx) error {
		if err := put("b")(tx); err != nil {
			return err
		}
		return boom
	}, put("c"))
	if errs[0] != nil || !errors.Is(errs[1], boom) || errs[2] != nil {
		t.Fatalf("outcomes %v", errs)
	}
	if got := keys(t, st, "a", "b", "c"); !got["a"] || got["b"] || !got["c"] {
		t.Fatalf("committed %v", got)
	}
	// The leader's transaction, then a and c in one.
	if n := st.commits.Load(); n != 2 {
		t.Fatalf("%d commits, want 2", n)
	}
}

// TestGroupCommitConflictIsDecidedInSerialOrder: two changes of one batch
// create the same record; the second conflicts with the first, and its
// answer is the conflict it gets on its own after the first committed.
func TestGroupCommitConflictIsDecidedInSerialOrder(t *testing.T) {
	st := store.NewMemory()
	b := New(Config{Store: st})
	errs := batch(t, b, put("x"), put("x"), put("y"))
	if errs[0] != nil || !errors.Is(errs[1], store.ErrVersionConflict) || errs[2] != nil {
		t.Fatalf("outcomes %v", errs)
	}
	if got := keys(t, st, "x", "y"); !got["x"] || !got["y"] {
		t.Fatalf("committed %v", got)
	}
}

// TestGroupCommitFailedCommitAppliesEachChangeAlone: when the commit of
// a batch fails, every change is applied again on its own and each one
// gets its own outcome.
func TestGroupCommitFailedCommitAppliesEachChangeAlone(t *testing.T) {
	st := &countingStore{Store: store.NewMemory()}
	st.failCommits.Store(1)
	b := New(Config{Store: st})
	errs := batch(t, b, put("a"), put("b"), put("c"))
	for i, err := range errs {
		if err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
	}
	if got := keys(t, st, "a", "b", "c"); !got["a"] || !got["b"] || !got["c"] {
		t.Fatalf("committed %v", got)
	}
	// The leader's, then a, b and c one by one.
	if n := st.commits.Load(); n != 4 {
		t.Fatalf("%d commits, want 4", n)
	}
}

// TestGroupCommitLinesGoWithTheRunsFirstCommittedChange: a run's pending
// log lines are taken once for a batch; when the batch's first change for
// the run fails, the next one appends them, so they precede its record.
func TestGroupCommitLinesGoWithTheRunsFirstCommittedChange(t *testing.T) {
	b := New(Config{Store: store.NewMemory()})
	k := runKey{"n:\"t\"", "r"}
	b.logs.Hold(k.tk, k.runID, []logbuf.Line{{Execution: "r/a/1"}})
	var got [][]logbuf.Line
	var mu sync.Mutex
	mk := func(fail bool) func(tx store.Tx, lines []logbuf.Line) error {
		return func(tx store.Tx, lines []logbuf.Line) error {
			mu.Lock()
			got = append(got, lines)
			mu.Unlock()
			if fail {
				return errors.New("fails")
			}
			return put(fmt.Sprint("k", len(lines)))(tx)
		}
	}
	first, second := mk(true), mk(false)
	c1 := &change{ctx: context.Background(), key: k, apply: first, turn: make(chan bool, 1)}
	c2 := &change{ctx: context.Background(), key: k, apply: second, turn: make(chan bool, 1)}
	b.commitBatch(context.Background(), []*change{c1, c2})
	if c1.err == nil || c2.err != nil {
		t.Fatalf("outcomes %v %v", c1.err, c2.err)
	}
	// Attempt 1: c1 gets the line and fails; attempt 2: c2 gets it and
	// commits; c1 alone: nothing left.
	if len(got) != 3 || len(got[0]) != 1 || len(got[1]) != 1 || len(got[2]) != 0 {
		t.Fatalf("lines seen per apply: %v", got)
	}
}
