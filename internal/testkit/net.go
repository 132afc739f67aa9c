package testkit

import (
	"net"
	"testing"
)

// FreeAddr is a loopback host:port nothing listens on: a port the kernel
// handed out and that was closed again.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
