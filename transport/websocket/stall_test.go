package websocket_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ws "github.com/coder/websocket"

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

// bigGet answers get with a 512 KiB spec, so that a few answers fill the
// socket buffers of a peer that does not read.
type bigGet struct{ server.EmptyBackend }

var bigSpec = []byte(`"` + strings.Repeat("x", 512<<10) + `"`)

func (bigGet) Get(context.Context, protocol.GetParams) (*protocol.GetResult, error) {
	return &protocol.GetResult{Spec: bigSpec, Status: protocol.EmptyStatus()}, nil
}

// floodWithoutReading sends gets without reading an answer until the
// server has ended the connection, and returns how the connection ended
// for the peer once it reads what reached it.
func floodWithoutReading(c *ws.Conn) error {
	for c.Write(context.Background(), ws.MessageText, []byte(getReq)) == nil {
	}
	for {
		if _, _, err := c.Read(context.Background()); err != nil {
			return err
		}
	}
}

// TestStalledPeersAreCutOff: peers that stop reading while the server
// writes to them are each cut off on their own, by the write deadline or
// by the bound on queued answers, without waiting for a stuck write: a
// peer sees 1008 when the close frame could be written at once, else the
// connection ends without one (1006).
func TestStalledPeersAreCutOff(t *testing.T) {
	srv := wiretest.NewWSServer(t, bigGet{}, wiretest.Options{Server: server.Options{WriteTimeout: 50 * time.Millisecond}})
	const n = 8
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		c := dialSmallWindow(t, srv.URL)
		wg.Go(func() { errs <- floodWithoutReading(c) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var ce ws.CloseError
		if errors.As(err, &ce) && ce.Code != ws.StatusPolicyViolation {
			t.Fatalf("a stalled peer got close code %d: %v", ce.Code, err)
		}
	}
	srv.Handler.Wait()
}
