package websocket_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	ws "github.com/coder/websocket"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/transport/websocket"
)

// TestTheHTTPHandlerReturnsOnceUpgraded: ServeHTTP returns after the
// upgrade while the connection goes on serving on a goroutine of its own
// (so an idle connection does not keep the HTTP server's goroutine), and
// Wait still waits for that connection to end.
func TestTheHTTPHandlerReturnsOnceUpgraded(t *testing.T) {
	h := &websocket.Handler{Dispatcher: &server.Dispatcher{Backend: server.EmptyBackend{}}}
	returned := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		returned <- struct{}{}
	}))
	defer srv.Close()
	ctx := context.Background()
	c, _, err := ws.Dial(ctx, "ws"+srv.URL[len("http"):], nil)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, returned)
	waited := make(chan struct{})
	go func() { h.Wait(); close(waited) }()
	if err := c.Write(ctx, ws.MessageText, []byte(getReq)); err != nil {
		t.Fatal(err)
	}
	_, got, err := c.Read(ctx)
	if err != nil || string(got) != getResp {
		t.Fatalf("after the handler returned: %q, %v", got, err)
	}
	select {
	case <-waited:
		t.Fatal("Wait returned while a connection was still being served")
	default:
	}
	_ = c.Close(ws.StatusNormalClosure, "")
	testkit.Recv(t, waited)
}
