package server

import (
	"errors"
	"testing"
	"time"

	"github.com/oecp/oecp/identity"
)

// closeBlocks is a transport whose write is stuck on a peer that does not
// read, and whose Close waits (as a close handshake waits for the stuck
// write's lock) until release is closed. It reports each Close as it
// begins.
type closeBlocks struct {
	closing chan<- struct{}
	release <-chan struct{}
}

func (f *closeBlocks) ReadFrame() ([]byte, error) { return nil, errors.New("unused") }
func (f *closeBlocks) WriteFrame([]byte) error    { return errors.New("unused") }
func (f *closeBlocks) Flush() error               { return nil }
func (f *closeBlocks) Close(CloseReason) error {
	f.closing <- struct{}{}
	<-f.release
	return nil
}

// TestStalledPeersAreCutOffTogether: one watchdog tick cuts off every
// connection whose write passed its deadline, each on its own, so none
// waits for another's close (before, 20 stalled peers were cut off one
// after another, 5 s apart).
func TestStalledPeersAreCutOffTogether(t *testing.T) {
	const n = 20
	closing := make(chan struct{}, n)
	release := make(chan struct{})
	w := &writeWatch{conns: map[*Conn]struct{}{}}
	conns := make([]*Conn, n)
	for i := range conns {
		c := NewConn(&Dispatcher{Backend: EmptyBackend{}}, &closeBlocks{closing: closing, release: release}, identity.Local(), Options{WriteTimeout: time.Second})
		c.writeStart.Store(time.Now().Add(-time.Hour).UnixNano()) // a write stuck for an hour
		w.conns[c] = struct{}{}
		conns[i] = c
	}
	go w.check(time.Now())
	for i := 0; i < n; i++ {
		select {
		case <-closing:
		case <-time.After(time.Minute): // a hang guard, not a timing assertion
			t.Fatalf("%d of %d stalled connections are being closed; the rest wait for them", i, n)
		}
	}
	close(release)
	for i, c := range conns {
		select {
		case <-c.Done():
		case <-time.After(time.Minute): // a hang guard, not a timing assertion
			t.Fatalf("connection %d was never closed", i)
		}
	}
}
