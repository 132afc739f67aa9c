package server_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/server"
)

// heldTransport is a NoWaitWriter whose input arrives in batches, as
// frames that reached a socket together do. Before it waits for the next
// batch it calls the core's input-wait hook and records whether any frame
// was still held back (written but pushed neither to the peer nor to a
// drainer's Flush). Each push is recorded as one write of the frames it
// carried (frames found held are pushed all the same). takeNone makes the next FlushNoWait push nothing (the peer's
// window is full), so the rest is owed to the next Flush.
type heldTransport struct {
	batches chan []string
	writes  chan []string // one entry per push to the peer

	mu       sync.Mutex
	wait     func()
	cur      []string
	pending  []string // written, neither pushed nor owed
	owed     []string // left for the next Flush
	takeNone bool
	heldBack []string // frames found held when the reader waited for input
}

func newHeldTransport() *heldTransport {
	return &heldTransport{batches: make(chan []string), writes: make(chan []string, 64)}
}

func (h *heldTransport) ReadFrame() ([]byte, error) {
	h.mu.Lock()
	if len(h.cur) == 0 {
		wait := h.wait
		h.mu.Unlock()
		wait()
		h.mu.Lock()
		// Pushed anyway, so that a test that waits for them fails on
		// heldBack instead of hanging.
		h.heldBack = append(h.heldBack, h.pending...)
		h.push()
		h.mu.Unlock()
		b, ok := <-h.batches
		if !ok {
			return nil, io.EOF
		}
		h.mu.Lock()
		h.cur = b
	}
	f := h.cur[0]
	h.cur = h.cur[1:]
	h.mu.Unlock()
	return []byte(f), nil
}

func (h *heldTransport) WriteFrame(b []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending = append(h.pending, string(b))
	return nil
}

func (h *heldTransport) WriteFrameHeld(b []byte) error { return h.WriteFrame(b) }

// push records the owed and pending frames as one write; the caller
// holds mu.
func (h *heldTransport) push() {
	if all := append(h.owed, h.pending...); len(all) > 0 {
		h.writes <- all
		h.owed, h.pending = nil, nil
	}
}

func (h *heldTransport) Flush() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.push()
	return nil
}

func (h *heldTransport) FlushNoWait() (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.takeNone {
		h.takeNone = false
		h.owed, h.pending = append(h.owed, h.pending...), nil
		return len(h.owed) > 0, nil
	}
	h.push()
	return false, nil
}

func (h *heldTransport) OnInputWait(f func()) { h.wait = f }

func (h *heldTransport) Close(server.CloseReason) error { return nil }

func (h *heldTransport) HeldBack() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.heldBack
}

func serveHeld(t *testing.T, h *heldTransport) {
	t.Helper()
	d := &server.Dispatcher{Backend: newScript(), InlineReads: true}
	c := server.NewConn(d, h, identity.Local(), server.Options{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Serve(context.Background())
	}()
	t.Cleanup(func() {
		close(h.batches)
		testkit.Recv(t, done)
		if held := h.HeldBack(); len(held) > 0 {
			t.Errorf("frames still held while the reader waited for input: %q", held)
		}
	})
}

// TestAnswersToFramesThatArrivedTogetherLeaveInOneWrite: the reader holds
// the answers it writes in place until it next waits for input, so three
// gets that arrived together are answered in one write, in frame order, and
// nothing is still held once the reader waits for the next frame (the
// transport checks that each time).
func TestAnswersToFramesThatArrivedTogetherLeaveInOneWrite(t *testing.T) {
	h := newHeldTransport()
	serveHeld(t, h)
	for round := 0; round < 3; round++ {
		h.batches <- []string{getReq("a", ""), `{`, getReq("b", "")}
		got := testkit.Recv(t, h.writes)
		want := []string{getResp("a"), `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`, getResp("b")}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("round %d: one write carried\n%q\nwant\n%q", round, got, want)
		}
	}
}

// TestHeldAnswersThePeerDoesNotTakeAreOwedToADrainer: when the peer takes
// none of the held answers at once, the reader does not wait for it: a
// drainer pushes them with the next Flush, and the reader goes on reading.
func TestHeldAnswersThePeerDoesNotTakeAreOwedToADrainer(t *testing.T) {
	h := newHeldTransport()
	h.takeNone = true
	serveHeld(t, h)
	h.batches <- []string{getReq(1, ""), getReq(2, "")}
	if got := testkit.Recv(t, h.writes); strings.Join(got, "\n") != getResp(1)+"\n"+getResp(2) {
		t.Fatalf("the drainer's flush carried %q", got)
	}
	h.batches <- []string{getReq(3, "")}
	if got := testkit.Recv(t, h.writes); len(got) != 1 || got[0] != getResp(3) {
		t.Fatalf("next write carried %q", got)
	}
}

// errTransport fails every held write: the connection ends instead of the
// reader holding a frame that can never be written.
type errTransport struct{ *heldTransport }

func (e errTransport) WriteFrameHeld([]byte) error { return errors.New("broken") }

func TestAFailedHeldWriteEndsTheConnection(t *testing.T) {
	h := newHeldTransport()
	d := &server.Dispatcher{Backend: newScript(), InlineReads: true}
	c := server.NewConn(d, errTransport{h}, identity.Local(), server.Options{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Serve(context.Background())
	}()
	h.batches <- []string{getReq(1, "")}
	testkit.Recv(t, c.Done())
	close(h.batches)
	testkit.Recv(t, done)
}
