// Package lograte bounds how often one log line repeats. A server that
// loses its database fails the same way on every retry of every loop; it
// says so once, then at most once per interval with the count of the
// lines it left out, and once more when the failure has stopped.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultEvery is how often a repeated line is logged at most: often
// enough to show an outage goes on, rarely enough that a fleet of
// replicas does not flood its logs while it lasts.
const DefaultEvery = 30 * time.Second

// Limiter logs lines keyed by their message (and an optional key) at most
// once per Every each. The zero value logs with DefaultEvery. It is safe
// for concurrent use.
type Limiter struct {
	Every time.Duration

	mu    sync.Mutex
	lines map[string]*line
}

type line struct {
	at      time.Time // when it was last logged
	skipped int       // repeats left out since
}

// Log logs msg at level on log unless the same key logged less than
// Every ago; a line that follows left-out repeats says how many
// ("repeated"). key "" is msg.
func (l *Limiter) Log(log *slog.Logger, level slog.Level, key, msg string, args ...any) {
	if key == "" {
		key = msg
	}
	every := l.Every
	if every <= 0 {
		every = DefaultEvery
	}
	now := time.Now()
	l.mu.Lock()
	if l.lines == nil {
		l.lines = map[string]*line{}
	}
	ln, seen := l.lines[key]
	if seen && now.Sub(ln.at) < every {
		ln.skipped++
		l.mu.Unlock()
		return
	}
	skipped := 0
	if seen {
		skipped = ln.skipped
	}
	l.lines[key] = &line{at: now}
	l.mu.Unlock()
	if skipped > 0 {
		args = append(args, "repeated", skipped)
	}
	log.Log(context.Background(), level, msg, args...)
}

// Clear ends the repeats of key: the next line of key is logged at once.
// It reports whether key had been logged, so that the caller can say the
// failure stopped.
func (l *Limiter) Clear(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, seen := l.lines[key]
	delete(l.lines, key)
	return seen
}

// Reset ends the repeats of every key, and reports whether any line had
// been logged since the last Reset.
func (l *Limiter) Reset() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	had := len(l.lines) > 0
	clear(l.lines)
	return had
}
