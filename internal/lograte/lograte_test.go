package lograte_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/oecp/oecp/internal/lograte"
)

// records collects the records logged to it.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

// TestRepeatsAreBounded: a line repeated every 100 ms for a minute is
// logged once per interval, each after the first saying how many repeats
// it left out; another line is not held back by it, and a cleared key
// logs at once.
func TestRepeatsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r records
		log := slog.New(&r)
		var l lograte.Limiter
		for range 600 {
			l.Log(log, slog.LevelError, "", "store unavailable")
			time.Sleep(100 * time.Millisecond)
		}
		l.Log(log, slog.LevelError, "", "other")
		if len(r.recs) != 3 {
			t.Fatalf("%d lines, want 2 (one per 30 s) and the other line", len(r.recs))
		}
		var repeated int64
		r.recs[1].Attrs(func(a slog.Attr) bool {
			if a.Key == "repeated" {
				repeated = a.Value.Int64()
			}
			return true
		})
		if repeated != 299 {
			t.Fatalf("the second line says %d repeats, want 299", repeated)
		}
		if !l.Clear("store unavailable") {
			t.Fatal("Clear of a logged key reports nothing was logged")
		}
		l.Log(log, slog.LevelError, "", "store unavailable")
		if len(r.recs) != 4 {
			t.Fatalf("a cleared key was held back: %d lines", len(r.recs))
		}
	})
}
