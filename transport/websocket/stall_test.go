package websocket_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	ws "github.com/coder/websocket"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

// dialSmallWindow connects with a 4 KiB receive buffer, so that a peer
// that does not read stalls the server's writes after a few answers.
func dialSmallWindow(t *testing.T, url string) *ws.Conn {
	t.Helper()
	d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	c, _, err := ws.Dial(context.Background(), url, &ws.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// bigGet answers get with a 256 KiB spec, so that a few answers fill the
// socket buffers of a peer that does not read.
type bigGet struct{ server.EmptyBackend }

var bigSpec = []byte(`"` + strings.Repeat("x", 256<<10) + `"`)

func (bigGet) Get(context.Context, protocol.GetParams) (*protocol.GetResult, error) {
	return &protocol.GetResult{Spec: bigSpec, Status: protocol.EmptyStatus()}, nil
}

// sendWithoutReading sends n gets and reads nothing.
func sendWithoutReading(t *testing.T, c *ws.Conn, n int) {
	t.Helper()
	for range n {
		if err := c.Write(context.Background(), ws.MessageText, []byte(getReq)); err != nil {
			t.Fatal(err)
		}
	}
}

// floodWithoutReading sends gets without reading an answer until a write
// fails.
func floodWithoutReading(c *ws.Conn) {
	for c.Write(context.Background(), ws.MessageText, []byte(getReq)) == nil {
	}
}

// TestStalledPeersAreCutOff: peers that stop reading while the server
// writes to them are each cut off on their own, by the write deadline or
// by the bound on queued answers, without waiting for the stuck write.
func TestStalledPeersAreCutOff(t *testing.T) {
	srv := wiretest.NewWSServer(t, bigGet{}, wiretest.Options{Server: server.Options{WriteTimeout: 50 * time.Millisecond}})
	const n = 4
	done := make(chan struct{}, n)
	conns := make([]*ws.Conn, n)
	for i := range conns {
		conns[i] = dialSmallWindow(t, srv.URL)
		go func() { floodWithoutReading(conns[i]); done <- struct{}{} }()
	}
	testkit.Wait(t, srv.Handler) // every connection was cut off
	for _, c := range conns {
		_ = c.CloseNow() // a write to a peer that is gone may never fail
	}
	for range n {
		testkit.Recv(t, done)
	}
}

// heldPlan answers get with a big spec and holds plan until its context
// ends.
type heldPlan struct {
	bigGet
	started, cancelled chan struct{}
}

func (b *heldPlan) Plan(ctx context.Context, _ protocol.PlanParams) (*protocol.PlanResult, error) {
	close(b.started)
	<-ctx.Done()
	close(b.cancelled)
	return nil, ctx.Err()
}

// TestReaderAnswersInPlaceNeverWaitOnThePeer: over a socket the reader
// writes the answers it produces itself (here gets answered in place) in
// place, but never waits on the peer: with a peer that stopped reading and
// its socket full of answers, a later request's cancel still reaches the
// handler.
func TestReaderAnswersInPlaceNeverWaitOnThePeer(t *testing.T) {
	b := &heldPlan{started: make(chan struct{}), cancelled: make(chan struct{})}
	srv := wiretest.NewWSServer(t, b, wiretest.Options{InlineReads: true})
	c := dialSmallWindow(t, srv.URL)
	sendWithoutReading(t, c, 64) // 16 MiB of answers, never read
	send := func(f string) {
		if err := c.Write(context.Background(), ws.MessageText, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":"p","method":"plan","params":{"graph":{}}}`)
	awaitOrFail(t, b.started, "the plan never started: the reader waits on the peer")
	send(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"p"}}`)
	awaitOrFail(t, b.cancelled, "the cancel never reached the handler: the reader waits on the peer")
}

func awaitOrFail(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal(msg)
	}
}
