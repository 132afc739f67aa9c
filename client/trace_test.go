package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/internal/testkit"
)

// Dial sends the Traceparent it is given on the upgrade request, and
// refuses one that would break the header.
func TestDialSendsTraceparent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer srv.Close()
	url := "ws://" + srv.Listener.Addr().String() + "/oecp"
	_, _ = client.Dial(context.Background(), url, client.DialOptions{AllowPlaintext: true, Traceparent: tp})
	if h := testkit.Recv(t, got); h != tp {
		t.Fatalf("traceparent %q", h)
	}
	if _, err := client.Dial(context.Background(), url, client.DialOptions{AllowPlaintext: true, Traceparent: tp + "\r\nX: y"}); err == nil {
		t.Fatal("a traceparent with a line break was sent")
	}
}
