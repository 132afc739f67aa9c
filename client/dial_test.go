package client_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/transport/websocket"
)

func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		url       string
		plaintext bool
		ok        bool
	}{
		{"wss://example.com/oecp", false, true},
		{"ws://127.0.0.1:7300/oecp", true, true},
		{"ws://127.0.0.1:7300/oecp", false, false},
		{"http://127.0.0.1/oecp", true, false},
		{"https://example.com/oecp", true, false},
		{"wss://user:pw@example.com/oecp", false, false},
		{"wss://user@example.com/oecp", false, false},
		{"wss://example.com/oecp?token=x", false, false},
		{"wss://example.com/oecp?", false, false},
		{"wss://example.com/oecp#frag", false, false},
		{"wss://example.com/oecp#", false, false},
		{"wss:///oecp", false, false},
		{"wss://:443/oecp", false, false},
		{"wss:example.com", false, false},
		{"example.com:7300", true, false},
		{"", true, false},
	} {
		_, err := client.CheckURL(tc.url, tc.plaintext)
		if (err == nil) != tc.ok {
			t.Errorf("CheckURL(%q, %v) = %v, want ok=%v", tc.url, tc.plaintext, err, tc.ok)
		}
		if err != nil && !errors.Is(err, client.ErrURLRefused) {
			t.Errorf("CheckURL(%q) error does not wrap ErrURLRefused: %v", tc.url, err)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("CheckURL(%q) leaks the password: %v", tc.url, err)
		}
	}
}

// TestDialRejectsBeforeAnySocket: a refused URL never reaches the server.
func TestDialRejectsBeforeAnySocket(t *testing.T) {
	url, ln := newWSServer(t, server.EmptyBackend{}, nil)
	host := strings.TrimPrefix(strings.TrimSuffix(url, "/oecp"), "ws://")
	for _, tc := range []struct {
		url   string
		allow bool
	}{
		{"ws://" + host + "/oecp", false}, // plaintext not allowed
		{"ws://u:p@" + host + "/oecp", true},
		{"ws://" + host + "/oecp?x=1", true},
		{"ws://" + host + "/oecp#f", true},
		{"http://" + host + "/oecp", true},
	} {
		_, err := client.Dial(context.Background(), tc.url, client.DialOptions{AllowPlaintext: tc.allow})
		if !errors.Is(err, client.ErrURLRefused) {
			t.Errorf("Dial(%q) = %v, want ErrURLRefused", tc.url, err)
		}
	}
	// A CA file that cannot be loaded fails closed before dialling.
	_, err := client.Dial(context.Background(), "wss://"+host+"/oecp", client.DialOptions{CAFiles: []string{filepath.Join(t.TempDir(), "missing.pem")}})
	if err == nil {
		t.Error("Dial with a missing CA file succeeded")
	}
	if n := ln.accepts.Load(); n != 0 {
		t.Fatalf("server accepted %d connections for refused URLs", n)
	}
}

// TestDialDoesNotFollowRedirects: a redirect on the upgrade is an error and
// the redirect target is never contacted.
func TestDialDoesNotFollowRedirects(t *testing.T) {
	target, ln := newWSServer(t, server.EmptyBackend{}, nil)
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(target, "ws://", "http://", 1), http.StatusFound)
	}))
	defer redir.Close()
	_, err := client.Dial(context.Background(), "ws://"+redir.Listener.Addr().String()+"/oecp", client.DialOptions{AllowPlaintext: true})
	if err == nil || !strings.Contains(err.Error(), "redirect") {
		t.Fatalf("Dial through a redirect = %v", err)
	}
	if n := ln.accepts.Load(); n != 0 {
		t.Fatalf("redirect target accepted %d connections", n)
	}
}

func TestDialTLS(t *testing.T) {
	h := &websocket.Handler{Dispatcher: &server.Dispatcher{Backend: server.EmptyBackend{}}, Options: serverOpts}
	mux := http.NewServeMux()
	mux.Handle("/oecp", h)
	srv := httptest.NewTLSServer(mux)
	defer func() { srv.Close(); testkit.Wait(t, h) }()
	url := "wss://" + srv.Listener.Addr().String() + "/oecp"

	// System roots do not trust the test certificate.
	if c, err := client.Dial(context.Background(), url, client.DialOptions{}); err == nil {
		_ = c.Close()
		t.Fatal("Dial trusted an unknown certificate")
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(context.Background(), url, client.DialOptions{CAFiles: []string{ca}})
	if err != nil {
		t.Fatalf("Dial with --ca-file: %v", err)
	}
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()

	bad := filepath.Join(t.TempDir(), "bad.pem")
	_ = os.WriteFile(bad, []byte("not a certificate"), 0o600)
	if _, err := client.Dial(context.Background(), url, client.DialOptions{CAFiles: []string{bad}}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("Dial with a bad CA file = %v", err)
	}
}

const tokensJSON = `[
 {"token":"good","principal":"alice","tenant":"t1","expiresAt":"2999-01-01T00:00:00Z"},
 {"token":"old","principal":"bob","tenant":"t1","expiresAt":"2000-01-01T00:00:00Z"}
]`

func TestDialBearerToken(t *testing.T) {
	toks, err := identity.ParseTokens([]byte(tokensJSON))
	if err != nil {
		t.Fatal(err)
	}
	url, _ := newWSServer(t, server.EmptyBackend{}, toks)
	c, err := client.Dial(context.Background(), url, client.DialOptions{AllowPlaintext: true, Token: "good"})
	if err != nil {
		t.Fatalf("Dial with a valid token: %v", err)
	}
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	for _, tok := range []string{"old", "unknown", ""} {
		_, err := client.Dial(context.Background(), url, client.DialOptions{AllowPlaintext: true, Token: tok})
		if !errors.Is(err, client.ErrUnauthorized) {
			t.Errorf("Dial with token %q = %v, want ErrUnauthorized", tok, err)
		}
	}
	if _, err := client.Dial(context.Background(), url, client.DialOptions{AllowPlaintext: true, Token: "a\r\nX-Evil: 1"}); err == nil {
		t.Error("a token with a line break was sent")
	}
}

// TestIdentityExpiryClose4401: the server closes an expiring connection
// with 4401 and the client reports ErrUnauthorized.
func TestIdentityExpiryClose4401(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	toks, err := identity.ParseTokens([]byte(`[{"token":"soon","principal":"p","tenant":"t","expiresAt":"2030-01-01T00:00:00.001Z"}]`))
	if err != nil {
		t.Fatal(err)
	}
	toks.SetClock(func() time.Time { return now })
	opts := serverOpts
	opts.Now = func() time.Time { return now }
	h := &websocket.Handler{Dispatcher: &server.Dispatcher{Backend: server.EmptyBackend{}}, Resolver: toks, Options: opts}
	srv := httptest.NewServer(h)
	defer func() { srv.Close(); testkit.Wait(t, h) }()
	c, err := client.Dial(context.Background(), "ws://"+srv.Listener.Addr().String()+"/", client.DialOptions{AllowPlaintext: true, Token: "soon"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testkit.Recv(t, c.Done()) // the connection is closed at expiry
	if !errors.Is(c.Err(), client.ErrUnauthorized) {
		t.Fatalf("Err = %v, want ErrUnauthorized", c.Err())
	}
}
