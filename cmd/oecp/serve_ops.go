package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/metrics"
	"github.com/oecp/oecp/ops"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
	"github.com/spf13/pflag"
)

// opsConfig is the operating side of `oecp serve`: metrics, readiness,
// HTTP bounds, quotas, retention and logs.
type opsConfig struct {
	metricsListen string
	allowHosts    multiFlag
	logFormat     string
	drainDelay    time.Duration
	http          ops.HTTPConfig
	quota         ops.QuotaConfig
	rate          rateFlag
}

// rateFlag parses --rate-per-tenant: "R/s" or a bare number, requests
// per second.
type rateFlag struct{ perSecond float64 }

func (r *rateFlag) String() string {
	if r.perSecond == 0 {
		return ""
	}
	return strconv.FormatFloat(r.perSecond, 'g', -1, 64) + "/s"
}

func (r *rateFlag) Type() string { return "value" }

func (r *rateFlag) Set(v string) error {
	n, err := strconv.ParseFloat(strings.TrimSuffix(v, "/s"), 64)
	if err != nil || n < 0 {
		return fmt.Errorf("want requests per second, like 50/s")
	}
	r.perSecond = n
	return nil
}

func (o *opsConfig) addFlags(fs *pflag.FlagSet) {
	o.http = ops.DefaultHTTPConfig
	fs.StringVar(&o.metricsListen, "metrics-listen", "", "serve /metrics (and /healthz, /readyz) on `ADDR` (host:port) instead of the main listener, to keep metrics private")
	fs.Var(&o.allowHosts, "allow-host", "extra Host name `PATTERN` (path.Match, no port) a server without authentication answers (repeatable; loopback names always pass)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format, `text|json`")
	fs.DurationVar(&o.drainDelay, "drain-delay", 0, "on SIGTERM, how long (`DURATION`) /readyz fails before the listener stops accepting")
	fs.DurationVar(&o.http.ReadTimeout, "http-read-timeout", o.http.ReadTimeout, "`DURATION` bound on reading a whole plain HTTP request (not WebSocket connections)")
	fs.DurationVar(&o.http.WriteTimeout, "http-write-timeout", o.http.WriteTimeout, "`DURATION` bound on writing a plain HTTP response (not WebSocket connections)")
	fs.DurationVar(&o.http.IdleTimeout, "http-idle-timeout", o.http.IdleTimeout, "close keep-alive HTTP connections idle for `DURATION`")
	fs.IntVar(&o.http.MaxPlainConns, "max-http-conns", o.http.MaxPlainConns, "bound `N` on connections not upgraded to WebSocket (unauthenticated, idle, probes; past it new ones are closed); 0: unbounded")
	fs.IntVar(&o.quota.ConnsPerPrincipal, "max-conns-per-principal", 0, "`N` open connections per principal; past it the upgrade answers 429 (0: unbounded)")
	fs.IntVar(&o.quota.SubscriptionsPerTenant, "max-subscriptions-per-tenant", 0, "`N` live subscriptions per tenant; past it a subscription answers SERVER_BUSY (0: unbounded)")
	fs.Var(&o.rate, "rate-per-tenant", "`R/s` requests per second per tenant (token bucket of one second's worth; past it requests answer SERVER_BUSY; default unbounded)")
}

func (o *opsConfig) validate() error {
	switch o.logFormat {
	case "text", "json":
	default:
		return fmt.Errorf("--log-format %q: want text or json", o.logFormat)
	}
	if o.quota.ConnsPerPrincipal < 0 || o.quota.SubscriptionsPerTenant < 0 || o.http.MaxPlainConns < 0 {
		return errors.New("quotas and --max-http-conns want 0 (unbounded) or more")
	}
	o.quota.RatePerTenant = o.rate.perSecond
	return nil
}

// logger checks the operating flags and returns the server's logger.
func (o *opsConfig) logger(w io.Writer, level string) (*slog.Logger, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	return newLogger(w, level, o.logFormat)
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// operated is what the operating side adds to a serve: metrics, the
// readiness probe, quotas and the access log.
type operated struct {
	cfg     opsConfig
	metrics *metrics.Metrics
	ready   *ops.Readiness
	limits  server.Limits
	log     *slog.Logger
}

// newOperated prepares the operating side and tells the backend to
// report to its metrics and readiness.
func newOperated(cfg opsConfig, log *slog.Logger, b *backendConfig) *operated {
	o := &operated{cfg: cfg, metrics: metrics.New(), ready: &ops.Readiness{}, log: log}
	b.metrics = o.metrics
	b.onStore = func(st store.Store) { o.ready.Store = st }
	if cfg.quota.Enabled() {
		o.limits = ops.NewQuotas(cfg.quota, nil)
	}
	return o
}

// observer is the connections' observer: metrics and the access log.
func (o *operated) observer() server.Observer {
	return server.Tee(o.metrics, ops.AccessLog{Log: o.log.With("log", "access")})
}

// routes adds the probes and, unless they have their own listener, the
// metrics to the main listener's mux.
func (o *operated) routes(mux *http.ServeMux) {
	o.probes(mux, o.cfg.metricsListen == "")
}

// probes adds /healthz (liveness), /readyz (readiness) and, with
// metrics, /metrics to mux; none needs a token.
func (o *operated) probes(mux *http.ServeMux, metrics bool) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set(healthHeader, healthVersion)
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("/readyz", o.ready)
	if metrics {
		mux.Handle("/metrics", o.metrics.Handler())
	}
}

// handler wraps the main listener's mux: deadlines on every plain route,
// and the loopback Host guard when connections are not authenticated.
func (o *operated) handler(mux http.Handler, authenticated bool) http.Handler {
	h := ops.Deadlines(mux, o.cfg.http, "/oecp")
	if !authenticated {
		h = ops.HostGuard(h, o.cfg.allowHosts, o.log)
	}
	return h
}

// serveMetrics serves the metrics listener, when configured, until ctx
// ends.
func (o *operated) serveMetrics(ctx context.Context) error {
	if o.cfg.metricsListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", o.cfg.metricsListen)
	if err != nil {
		return failf("serve", exitError, "--metrics-listen %s: %v", o.cfg.metricsListen, err)
	}
	mux := http.NewServeMux()
	o.probes(mux, true)
	srv := ops.NewServer(ops.Deadlines(mux, o.cfg.http, ""), o.cfg.http, o.log)
	o.log.Info("serving metrics", "url", fmt.Sprintf("http://%s/metrics", ln.Addr()))
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return nil
}

// drain flips readiness and waits out --drain-delay before the listener
// stops accepting.
func (o *operated) drain() {
	o.ready.Drain()
	if o.cfg.drainDelay > 0 {
		o.log.Info("draining: readiness fails before the listener closes", "delay", o.cfg.drainDelay)
		time.Sleep(o.cfg.drainDelay)
	}
}

// authResolver is the connections' identity: the anonymous local one, or
// bearer tokens from --auth-tokens, --auth-jwt, or either.
func authResolver(cfg serveConfig, log *slog.Logger) (identity.Resolver, error) {
	var vs []identity.Validator
	if cfg.authTokens != "" {
		toks, err := identity.LoadTokens(cfg.authTokens)
		if err != nil {
			return nil, err
		}
		vs = append(vs, toks)
	}
	if cfg.authJWT != "" {
		j, err := identity.LoadJWT(cfg.authJWT, log)
		if err != nil {
			return nil, err
		}
		vs = append(vs, j)
	}
	switch len(vs) {
	case 0:
		return identity.Static(identity.Local()), nil
	case 1:
		return logRefusals(identity.Bearer(vs[0]), log), nil
	}
	return logRefusals(identity.Bearer(identity.AnyOf(vs...)), log), nil
}

// logRefusals logs at debug why r refused a connection's token (the peer
// is told only that it was refused); never the token.
func logRefusals(r identity.Resolver, log *slog.Logger) identity.Resolver {
	return identity.ResolverFunc(func(req *http.Request) (identity.ConnectionIdentity, error) {
		id, err := r.Resolve(req)
		if err != nil {
			log.Debug("bearer token refused", "reason", identity.RefusalReason(err), "remote", req.RemoteAddr)
		}
		return id, err
	})
}
