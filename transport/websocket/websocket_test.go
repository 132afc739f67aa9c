package websocket_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	ws "github.com/coder/websocket"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/transport/websocket"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const getReq = `{"jsonrpc":"2.0","id":1,"method":"get","params":{}}`
const getResp = `{"jsonrpc":"2.0","id":1,"result":{"spec":null,"status":{"phase":"empty","observedGeneration":null,"currentRunId":null,"atCursor":null},"atCursor":null}}`

func closeStatus(t *testing.T, w *wiretest.WSWire) (ws.StatusCode, string) {
	t.Helper()
	for {
		_, err := w.Recv()
		if err == nil {
			continue
		}
		var ce ws.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Reason
		}
		return ws.CloseStatus(err), ""
	}
}

// expectClose reads until the server closes the connection and checks the
// close code and reason.
func expectClose(t *testing.T, w *wiretest.WSWire, code ws.StatusCode, reason string) {
	t.Helper()
	if gotCode, gotReason := closeStatus(t, w); gotCode != code || gotReason != reason {
		t.Fatalf("close %d %q, want %d %q", gotCode, gotReason, code, reason)
	}
}

func TestBinaryFrameClosesWithUnsupportedData(t *testing.T) {
	srv := wiretest.NewWSServer(t, server.EmptyBackend{}, wiretest.Options{})
	w := srv.Dial(t, nil)
	if err := w.SendBinary([]byte(getReq)); err != nil {
		t.Fatal(err)
	}
	expectClose(t, w, 1003, "binary frames are not supported")
}

func TestOversizedTextFrameClosesWithMessageTooBig(t *testing.T) {
	srv := wiretest.NewWSServer(t, server.EmptyBackend{}, wiretest.Options{})
	w := srv.Dial(t, nil)
	if err := w.Send(strings.Repeat(" ", 1<<20+16)); err != nil {
		t.Fatal(err)
	}
	expectClose(t, w, 1009, "message too big")
}

// TestExactlyOneMebibyteIsAccepted: the bound is inclusive.
func TestExactlyOneMebibyteIsAccepted(t *testing.T) {
	srv := wiretest.NewWSServer(t, server.EmptyBackend{}, wiretest.Options{})
	w := srv.Dial(t, nil)
	frame := getReq + strings.Repeat(" ", 1<<20-len(getReq))
	if len(frame) != 1<<20 {
		t.Fatal(len(frame))
	}
	if err := w.Send(frame); err != nil {
		t.Fatal(err)
	}
	got, err := w.Recv()
	if err != nil || got != getResp {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestMalformedJSONGetsParseErrorAndConnectionStays(t *testing.T) {
	srv := wiretest.NewWSServer(t, server.EmptyBackend{}, wiretest.Options{})
	w := srv.Dial(t, nil)
	_ = w.Send("not valid json")
	if got, _ := w.Recv(); got != `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}` {
		t.Fatalf("got %s", got)
	}
	_ = w.Send(getReq)
	if got, _ := w.Recv(); got != getResp {
		t.Fatalf("got %s", got)
	}
}

// countingBackend counts backend calls.
type countingBackend struct {
	server.EmptyBackend
	calls chan string
}

func (b *countingBackend) Get(ctx context.Context, p protocol.GetParams) (*protocol.GetResult, error) {
	b.calls <- "get"
	return b.EmptyBackend.Get(ctx, p)
}

// TestExpiryAtBoundaryCloses4401WithoutBackendCalls: a frame arriving at
// or after expiresAt never reaches the backend.
func TestExpiryAtBoundaryCloses4401WithoutBackendCalls(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := make(chan time.Time, 1)
	clock <- now
	current := now
	nowFn := func() time.Time {
		select {
		case current = <-clock:
		default:
		}
		return current
	}
	b := &countingBackend{calls: make(chan string, 10)}
	id := identity.ConnectionIdentity{Principal: "p", Tenant: "t", ExpiresAt: now.Add(time.Hour)}
	srv := wiretest.NewWSServer(t, b, wiretest.Options{Resolver: identity.Static(id), Server: server.Options{Now: nowFn}})
	w := srv.Dial(t, nil)
	_ = w.Send(getReq)
	if got, _ := w.Recv(); got != getResp {
		t.Fatalf("got %s", got)
	}
	testkit.Recv(t, b.calls)
	clock <- now.Add(time.Hour) // exactly expiresAt
	_ = w.Send(getReq)
	expectClose(t, w, 4401, "connection identity expired")
	select {
	case c := <-b.calls:
		t.Fatalf("backend called after expiry: %s", c)
	default:
	}
}

// TestIdleConnectionIsClosedAtExpiry: the expiry timer closes a connection
// that sends nothing.
func TestIdleConnectionIsClosedAtExpiry(t *testing.T) {
	id := identity.ConnectionIdentity{Principal: "p", Tenant: "t", ExpiresAt: time.Now().Add(300 * time.Millisecond)}
	srv := wiretest.NewWSServer(t, server.EmptyBackend{}, wiretest.Options{Resolver: identity.Static(id)})
	w := srv.Dial(t, nil)
	expectClose(t, w, 4401, "connection identity expired")
}

func TestBearerTokens(t *testing.T) {
	toks, err := identity.ParseTokens([]byte(`[
		{"token":"good","principal":"alice","tenant":"a","expiresAt":"2999-01-01T00:00:00Z"},
		{"token":"old","principal":"bob","tenant":"b","expiresAt":"2000-01-01T00:00:00Z"}]`))
	if err != nil {
		t.Fatal(err)
	}
	srv := wiretest.NewWSServer(t, server.EmptyBackend{}, wiretest.Options{Resolver: toks})
	for _, tc := range []struct {
		header string
		status int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer nope", http.StatusUnauthorized},
		{"Bearer old", http.StatusUnauthorized},
		{"Basic good", http.StatusUnauthorized},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("Authorization", tc.header)
		}
		_, resp, err := ws.Dial(context.Background(), srv.URL, &ws.DialOptions{HTTPHeader: h})
		if err == nil || resp == nil || resp.StatusCode != tc.status {
			t.Fatalf("%q: err=%v resp=%v", tc.header, err, resp)
		}
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer good")
	w := srv.Dial(t, h)
	_ = w.Send(getReq)
	if got, _ := w.Recv(); got != getResp {
		t.Fatalf("got %s", got)
	}
}

func TestCrossOriginUpgradeIsForbidden(t *testing.T) {
	srv := wiretest.NewWSServer(t, server.EmptyBackend{}, wiretest.Options{})
	h := http.Header{}
	h.Set("Origin", "https://evil.example")
	_, resp, err := ws.Dial(context.Background(), srv.URL, &ws.DialOptions{HTTPHeader: h})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("err=%v resp=%v", err, resp)
	}
}

// TestShutdownClosesWith1001AfterInFlightFinish.
func TestShutdownClosesGoingAway(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := wiretest.NewWSServer(t, server.EmptyBackend{}, wiretest.Options{})
	srv.Handler.Shutdown = ctx
	w := srv.Dial(t, nil)
	_ = w.Send(getReq)
	if got, _ := w.Recv(); got != getResp {
		t.Fatalf("got %s", got)
	}
	cancel()
	expectClose(t, w, 1001, websocket.ReasonGoingAway)
}
