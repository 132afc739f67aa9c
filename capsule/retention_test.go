package capsule_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/protocol"
)

// TestSupersededRunIsCompacted: a v1 run superseded by a changed apply is
// compacted once it ended before the cutoff: a watch of it from one of
// its cursors is GONE naming the compaction watermark, one without a
// cursor NOT_FOUND; the current run and get are untouched.
func TestSupersededRunIsCompacted(t *testing.T) {
	e := start(t, capsule.Options{})
	first := e.apply(spec(seq("main", succeedText("one"))), hi)
	e.waitFinished()
	old := e.history(*first.RunID)
	second := e.resubmit(*first.RunID)
	e.waitFinished()
	if n, err := e.b.Compact(context.Background(), time.Now().Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("Compact = %d, %v; want the superseded run", n, err)
	}
	cursor := old[0].Cursor
	_, err := e.b.Watch(local(), protocol.WatchParams{RunID: first.RunID, FromCursor: &cursor})
	if pe, ok := err.(*protocol.Error); !ok || pe.DataCode != protocol.Gone || !strings.Contains(string(pe.Details), "compactedThrough") {
		t.Fatalf("watch of the compacted run from %s: %v", cursor, err)
	}
	if _, err := e.b.Watch(local(), protocol.WatchParams{RunID: first.RunID}); err == nil {
		t.Fatal("the compacted run is still watchable")
	} else {
		wantAppError(t, err, protocol.NotFound)
	}
	if got := e.get(); got.Status.CurrentRunID == nil || *got.Status.CurrentRunID != second.RunID {
		t.Fatalf("get after compaction: %+v", got.Status)
	}
	if es := e.history(second.RunID); !finished(es) {
		t.Fatalf("current run's history: %s", es)
	}
}

// TestRetentionRunsInTheBackground: with Options.Retain the capsule
// compacts ended runs by itself and reports how many.
func TestRetentionRunsInTheBackground(t *testing.T) {
	counted := make(chan int, 16)
	e := start(t, capsule.Options{Retain: time.Nanosecond, Compacted: countTo(counted)})
	first := e.apply(spec(seq("main", succeedText("one"))), hi)
	e.waitFinished()
	e.resubmit(*first.RunID)
	e.waitFinished()
	select {
	case n := <-counted:
		if n != 1 {
			t.Fatalf("compacted %d runs, want 1", n)
		}
	case <-time.After(hangGuard):
		t.Fatal("retention never compacted the superseded run")
	}
}

// resubmit starts a new run of the cluster's graph, superseding runID.
func (e *env) resubmit(runID string) *protocol.ResubmitResult {
	e.t.Helper()
	r, err := e.b.Resubmit(local(), protocol.ResubmitParams{IfGeneration: 1, IfRunID: runID, IdempotencyKey: *key()})
	if err != nil {
		e.t.Fatalf("resubmit: %v", err)
	}
	return r
}

type countTo chan int

func (c countTo) Compacted(n int) { c <- n }
