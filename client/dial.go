package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"

	ws "github.com/coder/websocket"
)

// DialOptions configure Dial.
type DialOptions struct {
	// Token, when set, is sent as "Authorization: Bearer <token>" on the
	// upgrade request.
	Token string
	// AllowPlaintext permits ws:// URLs (tokens and data travel in clear).
	// Without it only wss:// is dialled.
	AllowPlaintext bool
	// RootCAs replaces the trust roots for wss:// (nil: the system roots).
	RootCAs *x509.CertPool
	// CAFiles are PEM files whose certificates are added to the roots.
	CAFiles []string
	// Traceparent, when set, is sent as the W3C traceparent header of the
	// upgrade request: the server's spans of this connection's requests
	// join that trace.
	Traceparent string
	// Conn configures the resulting connection.
	Conn Options
}

// CheckURL applies the dialing rules to a server URL without opening any
// socket: the scheme is ws or wss, there is a host, and there is no
// userinfo, query or fragment. ws:// is refused unless allowPlaintext. The
// error wraps ErrURLRefused.
func CheckURL(raw string, allowPlaintext bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a URL: %v", ErrURLRefused, raw, err)
	}
	switch u.Scheme {
	case "wss":
	case "ws":
		if !allowPlaintext {
			return nil, fmt.Errorf("%w: %s is plaintext ws://; use wss://, or allow plaintext explicitly", ErrURLRefused, redact(u))
		}
	default:
		return nil, fmt.Errorf("%w: %q: the scheme must be ws:// or wss://", ErrURLRefused, redact(u))
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%w: %q has no host", ErrURLRefused, redact(u))
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: %s carries userinfo; pass credentials as a bearer token instead", ErrURLRefused, redact(u))
	}
	if u.RawQuery != "" || u.ForceQuery {
		return nil, fmt.Errorf("%w: %s has a query string, which is not allowed", ErrURLRefused, redact(u))
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, fmt.Errorf("%w: %s has a fragment, which is not allowed", ErrURLRefused, redact(u))
	}
	return u, nil
}

// redact drops userinfo from a URL for messages.
func redact(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.User("REDACTED")
	}
	return c.String()
}

// IsLoopbackHost reports whether host (a URL host, with or without port)
// names the local machine: localhost or a loopback IP literal.
func IsLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// TLSConfig builds the TLS configuration of a wss:// dial: the system
// roots (or roots) plus every certificate of caFiles. Any failure to load
// roots is an error: the dial fails closed rather than trusting less or
// more than asked.
func TLSConfig(roots *x509.CertPool, caFiles []string) (*tls.Config, error) {
	if roots == nil {
		sys, err := x509.SystemCertPool()
		if err != nil {
			return nil, fmt.Errorf("load system trust roots: %w", err)
		}
		roots = sys
	} else {
		roots = roots.Clone()
	}
	for _, f := range caFiles {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", f)
		}
	}
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}

// Dial opens a WebSocket connection to an OECP server after checking the
// dialing rules (CheckURL). It never follows a redirect on the upgrade, so
// a wss:// URL cannot be downgraded.
func Dial(ctx context.Context, rawURL string, opts DialOptions) (*Conn, error) {
	u, err := CheckURL(rawURL, opts.AllowPlaintext)
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(opts.Token, "\r\n") {
		return nil, errors.New("the bearer token contains a line break")
	}
	if strings.ContainsAny(opts.Traceparent, "\r\n") {
		return nil, errors.New("the traceparent contains a line break")
	}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: false}
	if u.Scheme == "wss" {
		cfg, err := TLSConfig(opts.RootCAs, opts.CAFiles)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = cfg
	}
	hc := &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	defer hc.CloseIdleConnections()
	h := http.Header{}
	if opts.Token != "" {
		h.Set("Authorization", "Bearer "+opts.Token)
	}
	if opts.Traceparent != "" {
		h.Set("Traceparent", opts.Traceparent)
	}
	c, resp, err := ws.Dial(ctx, u.String(), &ws.DialOptions{HTTPClient: hc, HTTPHeader: h})
	if err != nil {
		if resp != nil {
			if resp.Body != nil {
				resp.Body.Close()
			}
			switch {
			case resp.StatusCode == http.StatusUnauthorized:
				return nil, fmt.Errorf("%w: the server answered HTTP 401 to the upgrade (token missing, unknown or expired)", ErrUnauthorized)
			case resp.StatusCode >= 300 && resp.StatusCode < 400:
				return nil, fmt.Errorf("the server answered a redirect (HTTP %d to %q), which is never followed: use the final URL", resp.StatusCode, resp.Header.Get("Location"))
			case resp.StatusCode != http.StatusSwitchingProtocols:
				return nil, fmt.Errorf("the server answered HTTP %d instead of upgrading to WebSocket (is the path /oecp?)", resp.StatusCode)
			}
		}
		return nil, fmt.Errorf("dial %s: %w", u, err)
	}
	c.SetReadLimit(MaxFrameBytes)
	return New(&wsTransport{c: c}, opts.Conn), nil
}

// DialCommand starts a server speaking NDJSON on stdio (for example
// exec.Command("oecp", "serve", "--stdio")) and connects to it. Closing the
// Conn closes the command's stdin and waits for it to exit.
func DialCommand(cmd *exec.Cmd, stderr io.Writer, opts Options) (*Conn, error) {
	t, err := StartCommand(cmd, stderr)
	if err != nil {
		return nil, err
	}
	return New(t, opts), nil
}
