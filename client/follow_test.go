package client_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
)

func noBackoff(int) time.Duration { return 0 }

func collect(t *testing.T, w *client.Watcher) []string {
	t.Helper()
	var got []string
	for {
		ev, ok := testkit.RecvOK(t, w.Events())
		if !ok {
			return got
		}
		got = append(got, ev.Cursor)
	}
}

// take returns the cursors of the next n events of w.
func take(t *testing.T, w *client.Watcher, n int) []string {
	t.Helper()
	var got []string
	for range n {
		ev := testkit.Recv(t, w.Events())
		got = append(got, ev.Cursor)
	}
	return got
}

// TestFollowWatchReconnectsAfterDrop: the server drops the connection
// mid-watch; the watch redials, resumes after the last delivered cursor,
// and the consumer sees every event exactly once, in order, ending with
// finished.
func TestFollowWatchReconnectsAfterDrop(t *testing.T) {
	forEachBinding(t, func(t *testing.T, bd binding) {
		fb := newFake()
		fb.appendEvents(evAdmission, evBegin)
		dial, drop := bd.start(t, fb)
		var mu sync.Mutex
		var resumes []string
		w, err := client.FollowWatch(context.Background(), client.FollowOptions{
			Dial: dial, Backoff: noBackoff,
			OnReconnect: func(_ error, from string) { mu.Lock(); resumes = append(resumes, from); mu.Unlock() },
		})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		got := take(t, w, 2)
		drop()
		fb.appendEvents(evEnd, evBookmark, evFinished)
		got = append(got, collect(t, w)...)
		if want := []string{"c1", "c2", "c3", "c4", "c5"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		// The history ended at the first establishment; resuming keeps it.
		if h := w.HistoryTail(); h != "c2" {
			t.Fatalf("HistoryTail = %q, want c2", h)
		}
		if err := w.Err(); err != nil {
			t.Fatalf("Err = %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(resumes) == 0 || resumes[0] != "c2" {
			t.Fatalf("resumed from %v, want c2 first", resumes)
		}
		fb.mu.Lock()
		defer fb.mu.Unlock()
		last := fb.watchCalls[len(fb.watchCalls)-1]
		if last.RunID == nil || *last.RunID != "run-1" || last.FromCursor == nil || *last.FromCursor != "c2" {
			t.Fatalf("resumed watch params %+v", last)
		}
	})
}

// TestFollowWatchResumesAfterSlowConsumer: a server SLOW_CONSUMER close is
// resumed on the same connection from the last delivered cursor, and a
// redelivered event is dropped.
func TestFollowWatchResumesAfterSlowConsumer(t *testing.T) {
	forEachBinding(t, func(t *testing.T, bd binding) {
		fb := newFake()
		fb.slowAfter = "c2"
		fb.dupAfter = "c1"
		fb.appendEvents(evAdmission, evBegin, evEnd, evBookmark, evFinished)
		dial, _ := bd.start(t, fb)
		c := mustDial(t, dial)
		w, err := client.FollowWatch(context.Background(), client.FollowOptions{Conn: c})
		if err != nil {
			t.Fatal(err)
		}
		got := collect(t, w)
		if want := []string{"c1", "c2", "c3", "c4", "c5"}; !reflect.DeepEqual(got, want) || w.Err() != nil {
			t.Fatalf("events %v (Err %v), want %v", got, w.Err(), want)
		}
		select {
		case <-c.Done():
			t.Fatal("FollowWatch closed a connection it does not own")
		default:
		}
	})
}

// TestFollowWatchNotFoundRestartsAndDedups: when the resume cursor is
// unknown, the watch restarts the run from its start and drops what it
// already delivered.
func TestFollowWatchNotFoundRestartsAndDedups(t *testing.T) {
	resumeAfterDrop(t, func(fb *fakeBackend) { fb.rejectCursors = true })
}

// resumeAfterDrop delivers two events, applies change to the backend,
// drops the connection, appends the run's end and checks that the watch
// delivers every event once, in order, and ends cleanly.
func resumeAfterDrop(t *testing.T, change func(*fakeBackend)) *fakeBackend {
	t.Helper()
	fb := newFake()
	fb.appendEvents(evAdmission, evBegin)
	dial, drop := startWS(t, fb)
	w, err := client.FollowWatch(context.Background(), client.FollowOptions{Dial: dial, Backoff: noBackoff})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got := take(t, w, 2)
	fb.mu.Lock()
	change(fb)
	fb.mu.Unlock()
	drop()
	fb.appendEvents(evEnd, evFinished)
	got = append(got, collect(t, w)...)
	if want := []string{"c1", "c2", "c3", "c4"}; !reflect.DeepEqual(got, want) || w.Err() != nil {
		t.Fatalf("events %v (Err %v), want %v", got, w.Err(), want)
	}
	return fb
}

// TestFollowWatchUnknownFromCursorIsNotFound: a FromCursor the server
// does not know is the caller's error, never a silent replay from the
// start.
func TestFollowWatchUnknownFromCursorIsNotFound(t *testing.T) {
	fb := newFake()
	fb.appendEvents(evAdmission, evBegin)
	fb.rejectCursors = true
	dial, _ := startWS(t, fb)
	if _, err := client.FollowWatch(context.Background(), client.FollowOptions{Dial: dial, FromCursor: "c9"}); client.ErrorCode(err) != protocol.NotFound {
		t.Fatalf("FollowWatch from an unknown cursor: %v, want NOT_FOUND", err)
	}
}

func TestFollowWatchStopsOnGone(t *testing.T) {
	fb := newFake()
	fb.gone = true
	dial, _ := startWS(t, fb)
	_, err := client.FollowWatch(context.Background(), client.FollowOptions{Dial: dial, RunID: "run-1"})
	if client.ErrorCode(err) != protocol.Gone {
		t.Fatalf("FollowWatch on a deleted run: %v", err)
	}

	// GONE while resuming ends the watch with that error.
	fb2 := newFake()
	fb2.appendEvents(evAdmission)
	dial2, drop2 := startWS(t, fb2)
	w, err := client.FollowWatch(context.Background(), client.FollowOptions{Dial: dial2, Backoff: noBackoff})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, w.Events())
	fb2.mu.Lock()
	fb2.gone = true
	fb2.mu.Unlock()
	drop2()
	collect(t, w)
	if client.ErrorCode(w.Err()) != protocol.Gone {
		t.Fatalf("Err = %v", w.Err())
	}
}

func TestFollowWatchGivesUpWhenServerGone(t *testing.T) {
	fb := newFake()
	fb.appendEvents(evAdmission)
	dial, drop := startWS(t, fb)
	refused := errors.New("refused")
	n := 0
	w, err := client.FollowWatch(context.Background(), client.FollowOptions{
		Dial: func(ctx context.Context) (*client.Conn, error) {
			n++
			if n == 1 {
				return dial(ctx)
			}
			return nil, refused
		},
		Backoff: noBackoff, MaxRedials: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, w.Events())
	drop()
	collect(t, w)
	if !errors.Is(w.Err(), refused) || n != 4 {
		t.Fatalf("Err = %v after %d dials", w.Err(), n)
	}
}

func TestFollowWatchClose(t *testing.T) {
	fb := newFake()
	fb.appendEvents(evAdmission)
	dial, _ := startWS(t, fb)
	w, err := client.FollowWatch(context.Background(), client.FollowOptions{Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, w.Events())
	w.Close()
	if _, ok := testkit.RecvOK(t, w.Events()); ok || w.Err() != nil {
		t.Fatalf("after Close: Err %v", w.Err())
	}
}

// TestFollowWatchRelistsAfterCompaction: when the run's history was
// compacted while the watch was away (GONE with compactedThrough), the
// watch re-reads the state and follows the current run from its start,
// dropping what it already delivered; a tombstoned run's GONE still ends
// it (TestFollowWatchStopsOnGone).
func TestFollowWatchRelistsAfterCompaction(t *testing.T) {
	fb := resumeAfterDrop(t, func(fb *fakeBackend) { fb.compacted = true })
	if fb.recorded("get") == nil {
		t.Fatal("the watch did not re-read the state")
	}
	if !client.Compacted(&client.Error{DataCode: protocol.Gone, Details: []byte(`{"compactedThrough":"c9"}`)}) ||
		client.Compacted(&client.Error{DataCode: protocol.Gone, Details: []byte(`{"tombstonedAt":"c9"}`)}) {
		t.Fatal("Compacted does not tell compaction from deletion")
	}
}
