package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/ops"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/tracing"
	"github.com/oecp/oecp/transport/ndjson"
	"github.com/oecp/oecp/transport/websocket"
	"github.com/oecp/oecp/webui"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
func (m *multiFlag) Type() string       { return "value" }

// serveConfig is everything `oecp serve` was asked for.
type serveConfig struct {
	listen            string
	stdio             bool
	authTokens        string
	authJWT           string
	tlsCert, tlsKey   string
	insecurePlaintext bool
	allowOrigins      multiFlag
	faultDelays       multiFlag
	shutdownGrace     time.Duration
	logLevel          string
	cpuProfile        string
	idleExit          time.Duration
	backend           backendConfig
	ops               opsConfig
	trace             traceConfig
}

func serveCmd(stdout, stderr io.Writer) *cobra.Command {
	var cfg serveConfig
	fs := newFlags("serve", "serve [--listen ADDR | --stdio] [--store sqlite|memory|postgres] [--data DIR | --dsn URL] [--auth-tokens FILE | --auth-jwt FILE] [flags]",
		`Runs a capsule: one cluster served over WebSocket (default 127.0.0.1:7300, upgrade at
/oecp, health at /healthz, the web view at /ui/) or over NDJSON on stdin/stdout (--stdio),
with the engine and a durable ledger behind it: SQLite in --data (the default), or
PostgreSQL at --dsn (or $OECP_DSN), which several replicas share. A non-loopback --listen
needs authentication (--auth-tokens, --auth-jwt, or both) and TLS (or --insecure-plaintext).
SIGINT/SIGTERM stop it gracefully.`)
	fs.note("Exit status: 0 stopped by a signal (or EOF on --stdio); 1 the server failed while serving;\n2 a flag, a file it names or the listen address is unusable.")
	cfg.addFlags(fs.FlagSet)
	return fs.run(func(args []string) error {
		if len(args) > 0 {
			return fs.usageErr("unexpected argument %q", args[0])
		}
		log, err := cfg.ops.logger(stderr, cfg.logLevel)
		if err != nil {
			return failf("serve", exitUsage, "%v", err)
		}
		// A line logged in a span carries its trace_id and span_id.
		log = slog.New(tracing.LogHandler(log.Handler()))
		stopTracing, err := cfg.trace.start(context.Background(), log)
		if err != nil {
			return failf("serve", exitUsage, "%v", err)
		}
		defer stopTracing()
		// Packages that log without being handed a logger (the agent
		// harness runner, the log package) go through the same handler:
		// one format and one level for every line the server writes.
		slog.SetDefault(log)
		delays, err := parseFaultDelays(cfg.faultDelays)
		if err != nil {
			return failf("serve", exitUsage, "%v", err)
		}
		if err := cfg.backend.validate(); err != nil {
			return failf("serve", exitUsage, "%v", err)
		}
		idle, err := cfg.idleExitWatch()
		if err != nil {
			return err
		}
		if cfg.cpuProfile != "" {
			f, err := os.Create(cfg.cpuProfile)
			if err != nil {
				return failf("serve", exitUsage, "--cpuprofile: %v", err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				return failf("serve", exitUsage, "--cpuprofile: %v", err)
			}
			defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
		}
		cfg.backend.sandbox.hide = []string{cfg.authTokens, cfg.authJWT, cfg.tlsCert, cfg.tlsKey}
		op := newOperated(cfg.ops, log, &cfg.backend)
		backend, closeBackend, err := newBackend(cfg.backend, log)
		if err != nil {
			// What fails here is a file a flag names: the workers file, or the
			// data directory and its ledger.
			return failf("serve", exitUsage, "%v", err)
		}
		defer closeBackend()

		// The cluster backends answer initialize and get from one store
		// snapshot without waiting, so the reader may run them in place.
		disp := &server.Dispatcher{Backend: backend, Log: log, FaultDelay: delays, InlineReads: true}
		opts := server.Options{ShutdownGrace: cfg.shutdownGrace, Log: log, Observer: op.observer()}
		if idle != nil {
			opts.Observer = server.Tee(opts.Observer, idle)
		}

		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		ctx, stopIdle := idle.start(ctx, cfg.idleExit, log)
		defer stopIdle()
		if err := op.serveMetrics(ctx); err != nil {
			return err
		}

		if cfg.stdio {
			// The one connection's caller is the process's: a W3C
			// traceparent in TRACEPARENT, as a WebSocket peer's is in
			// its upgrade request.
			opts.Caller = tracing.Parse(os.Getenv("TRACEPARENT"))
			if err := ndjson.Serve(ctx, disp, os.Stdin, stdout, stderr, identity.Local(), opts); err != nil {
				return failf("serve", exitError, "%v", err)
			}
			return nil
		}
		return serveWebSocket(ctx, cfg, disp, opts, op)
	})
}

// addFlags registers every flag of `oecp serve` on fs: a new serve flag is
// one more line here (or in the backend's or the operating flags).
func (cfg *serveConfig) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:7300", "host:port `ADDR` to serve WebSocket on (upgrade at /oecp, health at /healthz)")
	fs.BoolVar(&cfg.stdio, "stdio", false, "serve one NDJSON connection on stdin/stdout instead (diagnostics on stderr)")
	fs.StringVar(&cfg.authTokens, "auth-tokens", "", "JSON `FILE` of bearer tokens: [{\"token\",\"principal\",\"tenant\",\"expiresAt\"}]")
	fs.StringVar(&cfg.authJWT, "auth-jwt", "", "JSON `FILE` configuring JWT bearer tokens: {\"issuer\",\"audience\",\"jwks\",\"algorithms\",\"principalClaim\",\"tenantClaim\",\"leeway\"}")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "TLS certificate `FILE` (serve wss://)")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "TLS key `FILE`")
	fs.BoolVar(&cfg.insecurePlaintext, "insecure-plaintext", false, "allow plaintext ws:// on a non-loopback address (tokens travel in clear)")
	fs.Var(&cfg.allowOrigins, "allow-origin", "extra Origin host `PATTERN` accepted on upgrade (repeatable)")
	fs.Var(&cfg.faultDelays, "fault-delay", "`METHOD=DURATION`: delay that method's handler (repeatable; honours cancellation)")
	fs.DurationVar(&cfg.shutdownGrace, "shutdown-grace", 5*time.Second, "`DURATION` in-flight requests may take to finish on SIGTERM/SIGINT or EOF")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "log `LEVEL`: debug, info, warn, error")
	fs.DurationVar(&cfg.idleExit, "idle-exit", 0, "stop gracefully after `DURATION` with no open connection and no unfinished run (0: serve until stopped)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile to `FILE` until the server stops (diagnostics)")
	cfg.backend.addFlags(fs)
	cfg.ops.addFlags(fs)
	cfg.trace.addFlags(fs)
}

func parseFaultDelays(specs []string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, s := range specs {
		method, dur, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("--fault-delay %q: want METHOD=DURATION, e.g. get=500ms", s)
		}
		if _, known := protocol.LookupMethod(method); !known {
			return nil, fmt.Errorf("--fault-delay %q: unknown method %q", s, method)
		}
		d, err := time.ParseDuration(dur)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("--fault-delay %q: %q is not a duration like 250ms or 2s", s, dur)
		}
		out[method] = d
	}
	return out, nil
}

// isLoopbackListen reports whether addr binds only loopback interfaces.
func isLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// reachable is an address clients can dial for the listener at addr: a
// wildcard (0.0.0.0, ::; Go's wildcard sockets are dual-stack) becomes
// 127.0.0.1.
func reachable(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || !ta.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
}

// authenticated reports whether connections present a token.
func (cfg serveConfig) authenticated() bool { return cfg.authTokens != "" || cfg.authJWT != "" }

// credentialKinds are the kinds of bearer credential the server takes,
// which the web view's sign-in box names.
func (cfg serveConfig) credentialKinds() []string {
	var kinds []string
	if cfg.authTokens != "" {
		kinds = append(kinds, webui.CredentialToken)
	}
	if cfg.authJWT != "" {
		kinds = append(kinds, webui.CredentialJWT)
	}
	return kinds
}

// wsSecurity checks the WebSocket listener's security flags and loads the
// token resolver and TLS configuration (nil for plaintext). A non-loopback
// listen needs tokens, and TLS or an explicit --insecure-plaintext.
func wsSecurity(cfg serveConfig, log *slog.Logger) (identity.Resolver, *tls.Config, error) {
	useTLS := cfg.tlsCert != "" || cfg.tlsKey != ""
	if useTLS && (cfg.tlsCert == "" || cfg.tlsKey == "") {
		return nil, nil, failf("serve", exitUsage, "--tls-cert and --tls-key go together")
	}
	if !isLoopbackListen(cfg.listen) {
		var missing []string
		if !cfg.authenticated() {
			missing = append(missing, "--auth-tokens FILE or --auth-jwt FILE (so that connections are authenticated)")
		}
		if !useTLS && !cfg.insecurePlaintext {
			missing = append(missing, "--tls-cert FILE --tls-key FILE (or --insecure-plaintext to accept plaintext)")
		}
		if len(missing) > 0 {
			return nil, nil, failf("serve", exitUsage, "%s is not a loopback address: give %s", cfg.listen, strings.Join(missing, " and "))
		}
	}
	resolver, err := authResolver(cfg, log)
	if err != nil {
		return nil, nil, failf("serve", exitUsage, "%v", err)
	}
	if !useTLS {
		return resolver, nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
	if err != nil {
		return nil, nil, failf("serve", exitUsage, "load TLS key pair: %v", err)
	}
	return resolver, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// serveWebSocket serves the dispatcher on cfg.listen until ctx ends, then
// shuts down: new connections are refused, open ones get the shutdown
// grace (plus a margin) to close.
func serveWebSocket(ctx context.Context, cfg serveConfig, disp *server.Dispatcher, opts server.Options, op *operated) error {
	log := op.log
	resolver, tlsConfig, err := wsSecurity(cfg, log)
	if err != nil {
		return err
	}
	shutdown, beginShutdown := context.WithCancel(context.Background())
	defer beginShutdown()
	h := &websocket.Handler{
		Dispatcher:     disp,
		Resolver:       resolver,
		OriginPatterns: cfg.allowOrigins,
		Options:        opts,
		Shutdown:       shutdown,
		Log:            log,
		Limits:         op.limits,
	}
	mux := http.NewServeMux()
	mux.Handle("/oecp", h)
	mux.Handle(webui.Prefix, webui.New().WithCredentials(cfg.credentialKinds()...).WithTraceURL(cfg.trace.url))
	// The server's root is the web view.
	mux.Handle("GET /{$}", http.RedirectHandler(webui.Prefix, http.StatusFound))
	exportRoutes(mux, disp.Backend, resolver, cfg, log)
	op.routes(mux)
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return listenError(cfg.listen, err)
	}
	scheme := "ws"
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
		scheme = "wss"
	}
	srv := ops.NewServer(op.handler(mux, cfg.authenticated()), cfg.ops.http, log)
	log.Info("serving", "url", fmt.Sprintf("%s://%s/oecp", scheme, reachable(ln.Addr())), "listen", ln.Addr().String(),
		"web", fmt.Sprintf("http%s://%s%s", strings.TrimPrefix(scheme, "ws"), reachable(ln.Addr()), webui.Prefix))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return failf("serve", exitError, "%v", err)
	case <-ctx.Done():
	}
	op.drain()
	log.Info("shutting down")
	beginShutdown()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownGrace+5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	done := make(chan struct{})
	go func() { h.Wait(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		log.Warn("connections still open at shutdown deadline")
	}
	return nil
}
