// Package syncio serialises the use of a writer among goroutines.
package syncio

import (
	"io"
	"sync"
)

// Writer serialises whole writes to the writer it holds: lines written
// by several goroutines never interleave.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter serialises the writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p whole to the held writer.
func (l *Writer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Locked calls f while no write runs, to read what the held writer
// holds.
func (l *Writer) Locked(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}
