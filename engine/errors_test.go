package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// downLedger is a ledger whose store is down: the feed, the listing and
// the renewals all fail.
type downLedger struct {
	versioned
}

var errDown = errors.New("store: unavailable: terminating connection due to administrator command (SQLSTATE 57P01)")

func (*downLedger) Changed() <-chan struct{}                        { return make(chan struct{}) }
func (*downLedger) Changes(context.Context) ([]RunRef, bool, error) { return nil, false, errDown }
func (*downLedger) Running(context.Context) ([]RunRef, error)       { return nil, errDown }
func (*downLedger) ClaimTTL() time.Duration                         { return 15 * time.Second }
func (*downLedger) Renew(context.Context) ([]RunRef, error)         { return nil, errDown }
func (*downLedger) Release(context.Context, RunRef) error           { return errDown }

// levels counts the records logged to it by level.
type levels struct {
	mu sync.Mutex
	n  map[slog.Level]int
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *levels) WithGroup(string) slog.Handler            { return l }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[r.Level]++
	return nil
}

// TestOutageLogsAFewLinesNotThreeASecond: during a two-minute outage of
// the store a supervisor logs each failure once, then once per
// lograte.DefaultEvery (about three ERROR lines a second before: one per
// full pass the feed asked for, each second).
func TestOutageLogsAFewLinesNotThreeASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		count := &levels{n: map[slog.Level]int{}}
		s := New(&downLedger{}, nil, slog.New(count))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		time.Sleep(2 * time.Minute)
		cancel()
		<-done
		count.mu.Lock()
		defer count.mu.Unlock()
		// Two failing reads (the feed, the listing), each logged at
		// most once per 30 s, and once more at the start.
		if n := count.n[slog.LevelError]; n == 0 || n > 2*(4+1) {
			t.Fatalf("%d ERROR lines in a two-minute outage, want at most 10", n)
		}
		// Two warnings (the renewal failed, the claims are given up),
		// likewise.
		if n := count.n[slog.LevelWarn]; n > 2*(4+1) {
			t.Fatalf("%d WARN lines in a two-minute outage, want at most 10", n)
		}
	})
}
