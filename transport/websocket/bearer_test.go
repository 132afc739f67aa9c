package websocket_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	ws "github.com/coder/websocket"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/transport/websocket"
)

const secret = "s3cret+/token="

func bearerProto(token string) string {
	return websocket.BearerSubprotocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(token))
}

// tokenServer serves the empty backend at /oecp behind a token file; its
// URL is the WebSocket URL.
func tokenServer(t *testing.T, log *slog.Logger) (url string) {
	t.Helper()
	toks, err := identity.ParseTokens([]byte(`[
		{"token":"` + secret + `","principal":"alice","tenant":"a","expiresAt":"2999-01-01T00:00:00Z"},
		{"token":"old","principal":"bob","tenant":"b","expiresAt":"2000-01-01T00:00:00Z"}]`))
	if err != nil {
		t.Fatal(err)
	}
	h := &websocket.Handler{Dispatcher: &server.Dispatcher{Backend: server.EmptyBackend{}}, Resolver: toks, Log: log}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		testkit.Wait(t, h)
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/oecp"
}

// A browser offers its token as a subprotocol; the upgrade selects only
// "oecp", so the token never comes back in the response.
func TestTokenOfferedAsSubprotocolSignsIn(t *testing.T) {
	var logged bytes.Buffer
	url := tokenServer(t, slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})))
	c, resp, err := ws.Dial(context.Background(), url, &ws.DialOptions{Subprotocols: []string{bearerProto(secret), "oecp"}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	if got := resp.Header.Values("Sec-WebSocket-Protocol"); len(got) != 1 || got[0] != "oecp" {
		t.Fatalf("selected subprotocol %q, want only oecp", got)
	}
	if err := c.Write(context.Background(), ws.MessageText, []byte(getReq)); err != nil {
		t.Fatal(err)
	}
	if _, got, err := c.Read(context.Background()); err != nil || string(got) != getResp {
		t.Fatalf("got %s, %v", got, err)
	}
	enc := strings.TrimPrefix(bearerProto(secret), websocket.BearerSubprotocolPrefix)
	if strings.Contains(logged.String(), secret) || strings.Contains(logged.String(), enc) {
		t.Fatalf("the token reached the log: %s", logged.String())
	}
}

// A wrong, expired, malformed or repeated token subprotocol is refused with
// 401 before any upgrade, and the answer does not repeat the token.
func TestBadSubprotocolTokenIsRefused(t *testing.T) {
	url := tokenServer(t, nil)
	for name, protos := range map[string][]string{
		"wrong":     {bearerProto("nope"), "oecp"},
		"expired":   {bearerProto("old"), "oecp"},
		"malformed": {websocket.BearerSubprotocolPrefix + "!!", "oecp"},
		"empty":     {websocket.BearerSubprotocolPrefix, "oecp"},
		"repeated":  {bearerProto(secret), bearerProto(secret), "oecp"},
		"none":      {"oecp"},
	} {
		resp := refused(t, url, nil, protos, http.StatusUnauthorized)
		b, _ := io.ReadAll(resp.Body)
		if strings.Contains(string(b), "oecp.bearer") || strings.Contains(string(b), secret) {
			t.Fatalf("%s: the answer repeats the token: %s", name, b)
		}
	}
}

// The Authorization header wins over a token subprotocol.
func TestAuthorizationHeaderWinsOverSubprotocol(t *testing.T) {
	url := tokenServer(t, nil)
	h := http.Header{}
	h.Set("Authorization", "Bearer nope")
	refused(t, url, h, []string{bearerProto(secret), "oecp"}, http.StatusUnauthorized)
	h.Set("Authorization", "Bearer "+secret)
	c, _, err := ws.Dial(context.Background(), url, &ws.DialOptions{HTTPHeader: h, Subprotocols: []string{bearerProto("nope")}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	_ = c.CloseNow()
}

// The same-origin check still holds for a signed-in upgrade.
func TestSubprotocolTokenKeepsTheOriginCheck(t *testing.T) {
	url := tokenServer(t, nil)
	h := http.Header{}
	h.Set("Origin", "https://evil.example")
	refused(t, url, h, []string{bearerProto(secret), "oecp"}, http.StatusForbidden)
}

// refused dials with header and subprotocols and expects the upgrade to be
// answered with status; it returns that answer.
func refused(t *testing.T, url string, h http.Header, protos []string, status int) *http.Response {
	t.Helper()
	_, resp, err := ws.Dial(context.Background(), url, &ws.DialOptions{HTTPHeader: h, Subprotocols: protos})
	if err == nil || resp == nil || resp.StatusCode != status {
		t.Fatalf("%v %q: err=%v resp=%v, want HTTP %d", h, protos, err, resp, status)
	}
	return resp
}
