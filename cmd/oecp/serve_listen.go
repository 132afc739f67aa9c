package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/oecp/oecp/protocol"
)

// healthHeader is the response header of /healthz naming the protocol an
// oecp server speaks: a second `oecp serve` on the same address recognises
// the first one by it.
const healthHeader = "X-Oecp-Protocol"

// busyProbeTimeout bounds asking what holds a listen address.
const busyProbeTimeout = time.Second

// listenError is the usage error of a listen on addr that failed with
// err. For an address in use it says what holds it (another oecp serve
// answers /healthz with healthHeader) and how to serve on another port.
func listenError(addr string, err error) *exitErr {
	e := failf("serve", exitUsage, "listen on %s: %v", addr, err)
	if !errors.Is(err, syscall.EADDRINUSE) {
		return e
	}
	holder := "Another program holds that port."
	if v := oecpAt(addr); v != "" {
		holder = fmt.Sprintf("Another oecp serve (protocol %s) is serving there: stop it (Ctrl-C where it runs), or use it.", v)
	}
	return e.hint(holder).hint("To serve on another port: oecp serve --listen 127.0.0.1:PORT, then point clients at it with\n  --server ws://127.0.0.1:PORT/oecp or OECP_SERVER=ws://127.0.0.1:PORT/oecp (the web view is at http://127.0.0.1:PORT/ui/).")
}

// oecpAt is the protocol version of the oecp server answering /healthz at
// addr ("" when none does).
func oecpAt(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	c := &http.Client{Timeout: busyProbeTimeout}
	resp, err := c.Get("http://" + net.JoinHostPort(host, port) + "/healthz")
	if err != nil {
		return ""
	}
	_ = resp.Body.Close()
	return resp.Header.Get(healthHeader)
}

// healthVersion is healthHeader's value.
var healthVersion = protocol.Version
