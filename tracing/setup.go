package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// instrumentationName names the tracer of every oecp span.
const instrumentationName = "github.com/oecp/oecp"

// state is tracing while it is on.
type state struct {
	tp      *sdktrace.TracerProvider
	tracer  trace.Tracer
	sampler sdktrace.Sampler
}

// current is nil while tracing is off: the one load every Start pays.
var current atomic.Pointer[state]

// dropped and exported count spans since the process started, across
// Setups (metrics read them).
var dropped, exported atomic.Uint64

// Dropped is the number of ended spans that never reached a collector:
// the queue was full, or their export failed or timed out.
func Dropped() uint64 { return dropped.Load() }

// Exported is the number of spans a collector accepted.
func Exported() uint64 { return exported.Load() }

// Enabled reports whether tracing is on. Callers on hot paths check it
// before building span options.
func Enabled() bool { return current.Load() != nil }

// Provider is tracing turned on; Shutdown turns it off.
type Provider struct {
	s *state
}

// Setup turns tracing on with c (a Config that is not On leaves it off and
// returns a nil Provider, whose Shutdown does nothing; a protocol or
// sampler it does not know is refused either way). version becomes
// service.version. The exporter connects lazily: a collector that is not
// there yet fails no Setup.
func Setup(ctx context.Context, c Config, version string) (*Provider, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if !c.On() {
		return nil, nil
	}
	c = c.withDefaults()
	exp, err := newExporter(ctx, c)
	if err != nil {
		return nil, err
	}
	res, err := newResource(ctx, c, version)
	if err != nil {
		return nil, err
	}
	sampler, _ := c.sampler()
	return install(exp, c, res, sampler), nil
}

// install turns tracing on over exp (tests pass an in-memory one).
func install(exp sdktrace.SpanExporter, c Config, res *resource.Resource, sampler sdktrace.Sampler) *Provider {
	c = c.withDefaults()
	if sampler == nil {
		sampler, _ = c.sampler()
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSampler(sampler), sdktrace.WithIDGenerator(ids{}),
		sdktrace.WithSpanProcessor(newQueue(exp, c, &dropped, &exported))}
	if res != nil {
		opts = append(opts, sdktrace.WithResource(res))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	s := &state{tp: tp, tracer: tp.Tracer(instrumentationName), sampler: sampler}
	current.Store(s)
	return &Provider{s: s}
}

// Shutdown turns tracing off, then exports what is queued, waiting at
// most until ctx ends.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	current.CompareAndSwap(p.s, nil)
	return p.s.tp.Shutdown(ctx)
}

// ForceFlush exports what is queued, waiting at most until ctx ends.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.s.tp.ForceFlush(ctx)
}

func newExporter(ctx context.Context, c Config) (sdktrace.SpanExporter, error) {
	switch c.Protocol {
	case ProtocolHTTP:
		opts, err := endpointOption(c.Endpoint, "/v1/traces", otlptracehttp.WithEndpointURL)
		if err != nil {
			return nil, err
		}
		return otlptracehttp.New(ctx, opts...)
	default:
		opts, err := endpointOption(c.Endpoint, "", otlptracegrpc.WithEndpointURL)
		if err != nil {
			return nil, err
		}
		return otlptracegrpc.New(ctx, opts...)
	}
}

// endpointOption is the exporter's option naming the collector at
// endpoint (path added as endpointURL adds it), made by with; none when
// endpoint is "", which leaves the exporter to its environment.
func endpointOption[O any](endpoint, path string, with func(string) O) ([]O, error) {
	if endpoint == "" {
		return nil, nil
	}
	u, err := endpointURL(endpoint, path)
	if err != nil {
		return nil, err
	}
	return []O{with(u)}, nil
}

// endpointURL is the collector's URL with path added to its own (as
// OTEL_EXPORTER_OTLP_ENDPOINT is read); http:// means no TLS.
func endpointURL(endpoint, path string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("OTLP endpoint %q: want http://host:port or https://host:port", endpoint)
	}
	if path != "" && !strings.HasSuffix(u.Path, path) {
		u.Path = strings.TrimSuffix(u.Path, "/") + path
	}
	return u.String(), nil
}

// newResource is service.name (DefaultServiceName unless the environment
// or c names one), service.version, the SDK's attributes, then
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, then c's.
func newResource(ctx context.Context, c Config, version string) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{attribute.String("service.name", DefaultServiceName)}
	if version != "" {
		attrs = append(attrs, attribute.String("service.version", version))
	}
	opts := []resource.Option{resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv()}
	var own []attribute.KeyValue
	for _, kv := range strings.Split(c.ResourceAttributes, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("resource attribute %q: want key=value", kv)
		}
		if uv, err := url.QueryUnescape(strings.TrimSpace(v)); err == nil {
			v = uv
		}
		own = append(own, attribute.String(strings.TrimSpace(k), v))
	}
	if c.ServiceName != "" {
		own = append(own, attribute.String("service.name", c.ServiceName))
	}
	if len(own) > 0 {
		opts = append(opts, resource.WithAttributes(own...))
	}
	res, err := resource.New(ctx, opts...)
	if errors.Is(err, resource.ErrPartialResource) {
		err = nil
	}
	return res, err
}

// Install turns tracing on over exp, an exporter of the caller's (tests
// pass an in-memory one), with c's queue and sampler.
func Install(exp sdktrace.SpanExporter, c Config) *Provider {
	return install(exp, c, nil, nil)
}
