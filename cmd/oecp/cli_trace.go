package main

import (
	"context"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/oecp/oecp/tracing"
)

// cliTraceGrace bounds how long a client command waits at its end for its
// own span to reach the collector.
const cliTraceGrace = 2 * time.Second

// A client command joins a trace: with TRACEPARENT in its environment its
// connections send that traceparent, so the server's spans of its
// requests join the caller's trace; with its own tracing configured (the
// OTEL_* variables, as for oecp serve) it also records a span of its own,
// "oecp <command>" (under TRACEPARENT's span when set), and sends that.
var cliTrace struct {
	mu     sync.Mutex
	parent string
}

// cliTraceparent is the traceparent a client command's connections send
// ("" for none).
func cliTraceparent() string {
	cliTrace.mu.Lock()
	defer cliTrace.mu.Unlock()
	return cliTrace.parent
}

// startCLITrace starts command's trace as the environment says and
// returns what ends it. oecp serve traces on its own (--trace-*), and
// commands that never connect pay nothing but reading two variables.
func startCLITrace(command string) (end func()) {
	if command == "serve" {
		return func() {}
	}
	caller := tracing.Parse(os.Getenv("TRACEPARENT"))
	c, err := tracing.FromEnv(os.Getenv)
	var p *tracing.Provider
	if err == nil && c.On() {
		bi, _ := debug.ReadBuildInfo()
		p, _ = tracing.Setup(context.Background(), c, readBuild(bi).version)
	}
	if p == nil {
		if caller.IsValid() {
			setCLITraceparent(tracing.Traceparent(trace.ContextWithSpanContext(context.Background(), caller)))
		}
		return func() {}
	}
	ctx, span := tracing.Start(tracing.WithRemote(context.Background(), caller), "oecp "+command, trace.WithSpanKind(trace.SpanKindClient))
	setCLITraceparent(tracing.Traceparent(ctx))
	return func() {
		span.End()
		sctx, cancel := context.WithTimeout(context.Background(), cliTraceGrace)
		defer cancel()
		_ = p.Shutdown(sctx)
	}
}

func setCLITraceparent(v string) {
	cliTrace.mu.Lock()
	defer cliTrace.mu.Unlock()
	cliTrace.parent = v
}
