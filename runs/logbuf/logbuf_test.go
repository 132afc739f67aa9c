package logbuf_test

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs/logbuf"
	"github.com/oecp/oecp/store"
)

const tk, run = `n:"alice"`, "r"

var errDown = fmt.Errorf("%w: the database restarts", store.ErrUnavailable)

func line(execution, message string) logbuf.Line {
	return logbuf.Line{Execution: execution, Record: protocol.LogRecord{Level: "info", Target: "agent", Message: message}}
}

func messages(lines []logbuf.Line) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l.Execution+":"+l.Record.Message)
	}
	return out
}

// writer is a buffer's write function that takes the run's lines and
// sends them on written; while down is set it fails unavailable and
// holds the lines it took, as the run backend's write does.
type writer struct {
	buf     *logbuf.Buffer
	written chan []logbuf.Line
	mu      sync.Mutex
	down    bool
	tries   int
}

func newWriter() *writer {
	w := &writer{written: make(chan []logbuf.Line, 100)}
	w.buf = logbuf.New(w.write, slog.New(slog.DiscardHandler))
	return w
}

func (w *writer) write(tk, runID string) error {
	lines := w.buf.Take(tk, runID)
	w.mu.Lock()
	down := w.down
	w.tries++
	w.mu.Unlock()
	if down {
		w.buf.Hold(tk, runID, lines)
		return errDown
	}
	w.buf.Release(tk, runID)
	w.written <- lines
	return nil
}

func (w *writer) setDown(down bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.down = down
}

// receive collects written lines until n have arrived.
func (w *writer) receive(t *testing.T, n int) []logbuf.Line {
	t.Helper()
	var got []logbuf.Line
	for len(got) < n {
		got = append(got, testkit.Recv(t, w.written)...)
	}
	return got
}

// TestLinesAreWrittenInOrder: the flusher writes every line added, in
// the order they were added.
func TestLinesAreWrittenInOrder(t *testing.T) {
	w := newWriter()
	defer w.buf.Close()
	want := []string{"r/a/1:one", "r/a/1:two", ":three"}
	w.buf.Add(tk, run, line("r/a/1", "one"))
	w.buf.Add(tk, run, line("r/a/1", "two"))
	w.buf.Add(tk, run, line("", "three"))
	if got := messages(w.receive(t, 3)); !slices.Equal(got, want) {
		t.Fatalf("written %q, want %q", got, want)
	}
}

// TestADeferredLineRidesTheRunsNextWrite: a deferred line starts no
// flusher: a write of its run within the wait takes it, and nothing else
// writes it; a deferred line no write takes is written once the wait
// ends.
func TestADeferredLineRidesTheRunsNextWrite(t *testing.T) {
	const wait = 50 * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		w := newWriter()
		defer w.buf.Close()
		w.buf.Defer(tk, run, line("", "ready"), wait)
		synctest.Wait()
		if w.tries != 0 {
			t.Fatalf("a deferred line was written at once (%d writes)", w.tries)
		}
		if got := messages(w.buf.Take(tk, run)); !slices.Equal(got, []string{":ready"}) {
			t.Fatalf("the run's own write took %q", got)
		}
		time.Sleep(wait)
		synctest.Wait()
		if w.tries != 0 {
			t.Fatalf("the flusher wrote %d times after the line was taken", w.tries)
		}
		w.buf.Defer(tk, run, line("", "ready again"), wait)
		time.Sleep(wait)
		if got := messages(<-w.written); !slices.Equal(got, []string{":ready again"}) {
			t.Fatalf("written %q once the wait ended", got)
		}
	})
}

// TestCloseWritesDeferredLines: a deferred line still pending when the
// buffer closes is written, at once.
func TestCloseWritesDeferredLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWriter()
		began := time.Now()
		w.buf.Defer(tk, run, line("", "ready"), time.Hour)
		w.buf.Close()
		if got := messages(<-w.written); !slices.Equal(got, []string{":ready"}) || time.Since(began) != 0 {
			t.Fatalf("written %q after %v", got, time.Since(began))
		}
	})
}

// TestHeldLinesComeFirstWithinTheBound: lines given back go ahead of the
// lines logged since; while the run is held, each execution keeps at
// most MaxHeld lines, and a write that succeeds ends the bound.
func TestHeldLinesComeFirstWithinTheBound(t *testing.T) {
	w := newWriter()
	defer w.buf.Close()
	var held []logbuf.Line
	for i := range logbuf.MaxHeld + 5 {
		held = append(held, line("x", fmt.Sprint(i)))
	}
	w.buf.Hold(tk, run, held)             // starts no flusher
	w.buf.Add(tk, run, line("x", "late")) // past the bound: dropped
	w.buf.Add(tk, run, line("y", "other"))
	got := messages(w.receive(t, logbuf.MaxHeld+1))
	if len(got) != logbuf.MaxHeld+1 || got[0] != "x:0" || got[logbuf.MaxHeld-1] != fmt.Sprintf("x:%d", logbuf.MaxHeld-1) || got[logbuf.MaxHeld] != "y:other" {
		t.Fatalf("written %d lines: first %q, around the bound %q", len(got), got[0], got[logbuf.MaxHeld-1:])
	}
	// Released by the write: the bound no longer applies.
	for i := range logbuf.MaxHeld + 1 {
		w.buf.Add(tk, run, line("x", fmt.Sprint(i)))
	}
	if got := w.receive(t, logbuf.MaxHeld+1); len(got) != logbuf.MaxHeld+1 {
		t.Fatalf("%d lines written after the release, want %d", len(got), logbuf.MaxHeld+1)
	}
}

// TestLinesWaitForTheStore: lines whose write failed unavailable are
// written, in order, by the flusher's next try once the store writes.
func TestLinesWaitForTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWriter()
		defer w.buf.Close()
		w.setDown(true)
		w.buf.Add(tk, run, line("", "one"))
		synctest.Wait() // the first try failed; the flusher pauses
		w.buf.Add(tk, run, line("", "two"))
		w.setDown(false)
		got := messages(<-w.written)
		if want := []string{":one", ":two"}; !slices.Equal(got, want) {
			t.Fatalf("written %q, want %q", got, want)
		}
	})
}

// TestCloseDropsLinesTheStoreCannotTake: a flusher waiting for a store
// that stays down gives up when the buffer closes, without another try.
func TestCloseDropsLinesTheStoreCannotTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWriter()
		w.setDown(true)
		w.buf.Add(tk, run, line("", "one"))
		synctest.Wait()
		w.buf.Close()
		if w.tries != 1 || len(w.buf.Take(tk, run)) != 0 {
			t.Fatalf("%d tries, lines left %v", w.tries, w.buf.Take(tk, run))
		}
	})
}

// TestFencedKeepsLinesOfHeldLeases: a line fenced by a lease still held
// under its epoch is kept, one fenced by a lost lease is dropped, one on
// no lease's behalf is kept; a lease that cannot be read fails.
func TestFencedKeepsLinesOfHeldLeases(t *testing.T) {
	st := store.NewMemory()
	ctx := testkit.Bounded(t)
	c := store.NewClaims(st, "me")
	if err := c.Claim(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	lines := []logbuf.Line{line("", "free"), line("", "held"), line("", "lost"), line("", "held again")}
	lines[1].Fence = c.Fence("held")
	lines[2].Fence = store.FenceOf("held", c.Epoch("held")+1)
	lines[3].Fence = c.Fence("held")
	var kept []logbuf.Line
	err := st.View(ctx, func(tx store.ReadTx) (err error) {
		kept, err = logbuf.Fenced(tx, lines)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := messages(kept), []string{":free", ":held", ":held again"}; !slices.Equal(got, want) {
		t.Fatalf("kept %q, want %q", got, want)
	}
	err = st.View(ctx, func(tx store.ReadTx) error {
		_, err := logbuf.Fenced(brokenTx{tx}, lines)
		return err
	})
	if !errors.Is(err, errRead) {
		t.Fatalf("fenced over a failing read: %v", err)
	}
}

var errRead = errors.New("read fails")

// brokenTx fails every lease read.
type brokenTx struct{ store.ReadTx }

func (brokenTx) Lease(string) (store.Lease, bool, error) {
	return store.Lease{}, false, errRead
}

// TestLineAfterCloseIsDropped: a line added once Close began starts no
// flusher (none may start after Close's Wait) and is not kept.
func TestLineAfterCloseIsDropped(t *testing.T) {
	w := newWriter()
	w.buf.Close()
	w.buf.Add(tk, run, line("r/a/1", "late"))
	w.buf.Close() // waits for a flusher, had one started
	w.mu.Lock()
	tries := w.tries
	w.mu.Unlock()
	if tries != 0 || len(w.buf.Take(tk, run)) != 0 {
		t.Fatalf("a line added after Close was written (%d writes) or kept", tries)
	}
}
