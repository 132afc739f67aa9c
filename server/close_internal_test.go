package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oecp/oecp/identity"
)

// stuckReader is a transport whose reads cannot be interrupted by Close
// (a blocking stdin) and whose writes fail (a broken stdout).
type stuckReader struct{ frames chan []byte }

func (f *stuckReader) ReadFrame() ([]byte, error) {
	b, ok := <-f.frames
	if !ok {
		return nil, errors.New("eof")
	}
	return b, nil
}
func (f *stuckReader) WriteFrame([]byte) error { return errors.New("broken pipe") }
func (f *stuckReader) Flush() error            { return nil }
func (f *stuckReader) Close(CloseReason) error { return nil }

// TestWriteFailureRunsTheCloseSequence: a broken write ends the connection
// (Done closes, subscriptions end) even while the reader is stuck in a
// read that Close cannot interrupt.
func TestWriteFailureRunsTheCloseSequence(t *testing.T) {
	ft := &stuckReader{frames: make(chan []byte, 1)}
	ft.frames <- []byte(`{"jsonrpc":"2.0","id":1,"method":"get","params":{}}`)
	c := NewConn(&Dispatcher{Backend: EmptyBackend{}}, ft, identity.Local(), Options{})
	served := make(chan struct{})
	go func() { c.Serve(context.Background()); close(served) }()
	select {
	case <-c.Done():
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("the close sequence never ran after the write failed")
	}
	close(ft.frames) // let the stuck reader go
	select {
	case <-served:
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("Serve never returned once its reader was let go")
	}
}
