package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/oecp/oecp/tracing"
)

// traceShutdownGrace bounds how long a stopping server waits for its
// queued spans to reach the collector: a collector that is down never
// holds a shutdown longer.
const traceShutdownGrace = 5 * time.Second

// traceConfig is `oecp serve`'s tracing: the --trace-* flags, each over
// its standard OTEL_* variable, and the trace viewer's URL template.
type traceConfig struct {
	flags tracing.Config
	url   string
}

func (t *traceConfig) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&t.flags.Exporter, "trace-exporter", "", "`NAME` of the trace exporter: otlp or none (default $OTEL_TRACES_EXPORTER; tracing is off unless it or an endpoint is set)")
	fs.StringVar(&t.flags.Endpoint, "trace-endpoint", "", "OTLP collector `URL`, e.g. http://127.0.0.1:4317 (default $OTEL_EXPORTER_OTLP_ENDPOINT); setting it turns tracing on")
	fs.StringVar(&t.flags.Protocol, "trace-protocol", "", "OTLP `PROTOCOL`: grpc or http/protobuf (default $OTEL_EXPORTER_OTLP_PROTOCOL, else grpc)")
	fs.StringVar(&t.flags.ServiceName, "trace-service-name", "", "`NAME` of the service (service.name) of the spans (default $OTEL_SERVICE_NAME, else oecp)")
	fs.StringVar(&t.flags.ResourceAttributes, "trace-resource-attributes", "", "`KEY=VALUE,...` added to the spans' resource (with $OTEL_RESOURCE_ATTRIBUTES)")
	fs.StringVar(&t.flags.Sampler, "trace-sampler", "", "`SAMPLER`: always_on, always_off, traceidratio or parentbased_* (default $OTEL_TRACES_SAMPLER, else parentbased_always_on); a run is sampled whole")
	fs.StringVar(&t.flags.SamplerArg, "trace-sampler-arg", "", "the sampler's `RATIO` (default $OTEL_TRACES_SAMPLER_ARG)")
	fs.StringVar(&t.url, "trace-url", "", "`TEMPLATE` of a trace's page in the trace viewer, {traceId} replaced, e.g. http://jaeger:16686/trace/{traceId}: the web view links a run to it")
}

// check refuses a trace URL template without {traceId}.
func (t traceConfig) check() error {
	if t.url != "" && !strings.Contains(t.url, "{traceId}") {
		return fmt.Errorf("--trace-url %q: the template must contain {traceId}", t.url)
	}
	if t.url != "" && !strings.HasPrefix(t.url, "http://") && !strings.HasPrefix(t.url, "https://") {
		return fmt.Errorf("--trace-url %q: want an http:// or https:// URL", t.url)
	}
	return nil
}

// start turns tracing on as the environment and the flags say (off when
// neither does); stop exports what is queued, waiting at most
// traceShutdownGrace.
func (t traceConfig) start(ctx context.Context, log *slog.Logger) (stop func(), err error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	env, err := tracing.FromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	c := env.Merge(t.flags)
	bi, _ := debug.ReadBuildInfo()
	p, err := tracing.Setup(ctx, c, readBuild(bi).version)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if p == nil {
		return func() {}, nil
	}
	log.Info("tracing on", "protocol", firstNonEmpty(c.Protocol, tracing.ProtocolGRPC), "endpoint", firstNonEmpty(c.Endpoint, "(from the OTEL_EXPORTER_OTLP_* variables)"))
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), traceShutdownGrace)
		defer cancel()
		if err := p.Shutdown(sctx); err != nil {
			log.Warn("tracing: spans still queued at shutdown were dropped", "err", err)
		}
	}, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
