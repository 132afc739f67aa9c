// Package ops is the operating side of `oecp serve`'s HTTP listener: the
// http.Server with its timeouts, connection bound and error log, the
// loopback Host guard of a server without authentication, readiness,
// per-principal and per-tenant quotas, and the access log. cmd/oecp wires
// it; the connection core (package server) sees only its Observer and
// Limits ports.
package ops

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strings"
	"sync/atomic"
	"time"
)

// HTTPConfig configures the listener's plain-HTTP side.
type HTTPConfig struct {
	// ReadHeaderTimeout bounds reading a request's headers (every route).
	ReadHeaderTimeout time.Duration
	// ReadTimeout and WriteTimeout bound reading a whole request and
	// writing its response on every route but the WebSocket upgrade
	// (whose connection is then the connection core's to bound).
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle between requests.
	IdleTimeout time.Duration
	// MaxPlainConns bounds connections not (yet) upgraded to WebSocket:
	// those reading headers, idle keep-alives, health probes, refused
	// upgrades. A connection past the bound is closed as it is accepted.
	// 0: unbounded.
	MaxPlainConns int
}

// DefaultHTTPConfig is what `oecp serve` uses unless told otherwise.
var DefaultHTTPConfig = HTTPConfig{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       30 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       60 * time.Second,
	MaxPlainConns:     256,
}

// NewServer returns an http.Server for h with cfg's timeouts and bound,
// whose own errors (accept failures such as "too many open files",
// recovered handler panics) are logged to lg at error level, TLS
// handshake failures at warn.
func NewServer(h http.Handler, cfg HTTPConfig, lg *slog.Logger) *http.Server {
	plain := &plainConns{max: int64(cfg.MaxPlainConns), log: lg}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          log.New(errorLog{lg}, "", 0),
		ConnState:         plain.track,
	}
}

// errorLog writes net/http's error log lines to slog.
type errorLog struct{ log *slog.Logger }

func (e errorLog) Write(p []byte) (int, error) {
	msg := string(bytes.TrimRight(p, "\n"))
	level := slog.LevelError
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		level = slog.LevelWarn // a port scan or a client that does not trust us
	}
	e.log.Log(context.Background(), level, "http server", "err", msg)
	return len(p), nil
}

// plainConns counts connections that are not hijacked (upgraded) and
// closes those accepted past the bound.
type plainConns struct {
	max  int64
	n    atomic.Int64
	log  *slog.Logger
	warn atomic.Bool
}

func (p *plainConns) track(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		if n := p.n.Add(1); p.max > 0 && n > p.max {
			if p.warn.CompareAndSwap(false, true) {
				p.log.Warn("too many plain HTTP connections; closing new ones", "max", p.max)
			}
			_ = c.Close()
		} else if n <= p.max/2 {
			p.warn.Store(false)
		}
	case http.StateHijacked, http.StateClosed:
		p.n.Add(-1)
	}
}

// Deadlines bounds reading each request and writing its response with
// cfg's timeouts on every route except upgrade (the WebSocket endpoint).
func Deadlines(h http.Handler, cfg HTTPConfig, upgrade string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != upgrade {
			rc := http.NewResponseController(w)
			now := time.Now()
			if cfg.ReadTimeout > 0 {
				_ = rc.SetReadDeadline(now.Add(cfg.ReadTimeout))
			}
			if cfg.WriteTimeout > 0 {
				_ = rc.SetWriteDeadline(now.Add(cfg.WriteTimeout))
			}
		}
		h.ServeHTTP(w, r)
	})
}

// HostGuard answers 421 Misdirected Request to a request whose Host is
// not a loopback name or address (127.0.0.0/8, localhost, [::1], any
// port) and matches none of allow (path.Match patterns over the host
// without its port, --allow-host). A server without authentication wraps
// every route in it: a DNS-rebinding page (Host: evil.example, with a
// matching Origin) must not reach the anonymous local identity.
func HostGuard(h http.Handler, allow []string, lg *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !LoopbackHost(r.Host, allow) {
			lg.Warn("request refused: Host is not loopback", "remote", r.RemoteAddr, "path", r.URL.Path)
			http.Error(w, "misdirected request: this server answers only loopback host names (see --allow-host)", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// LoopbackHost reports whether a Host header names this machine's
// loopback interface, or matches one of allow.
func LoopbackHost(hostport string, allow []string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, p := range allow {
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(host)); ok {
			return true
		}
	}
	return false
}
