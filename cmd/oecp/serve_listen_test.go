package main

import (
	"net"
	"net/url"
	"strings"
	"testing"
)

// TestServeAddressInUse: a second server on a port in use says whether
// another oecp serve holds it, and how to serve on another port and point
// clients at it.
func TestServeAddressInUse(t *testing.T) {
	first := startServer(t)
	u, err := url.Parse(first.url)
	if err != nil {
		t.Fatal(err)
	}
	r := oecp(t, nil, "serve", "--listen", u.Host, "--store", "memory")
	expect(t, r, 2, nil, []string{"address already in use", "Another oecp serve", "--listen 127.0.0.1:PORT", "--server ws://127.0.0.1:PORT/oecp", "OECP_SERVER"})

	// Something else holding the port is not taken for an oecp server.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	r = oecp(t, nil, "serve", "--listen", ln.Addr().String(), "--store", "memory")
	expect(t, r, 2, nil, []string{"Another program holds that port", "--listen 127.0.0.1:PORT"})
	if strings.Contains(r.stderr, "Another oecp serve") {
		t.Errorf("a plain listener was taken for an oecp server:\n%s", r.stderr)
	}
}
