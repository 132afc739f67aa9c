package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderTraceparent is the W3C trace context header (and, upper-cased, the
// TRACEPARENT environment variable a CLI reads).
const HeaderTraceparent = "traceparent"

var w3c = propagation.TraceContext{}

// Remote is the caller's span context a request's headers carry
// (traceparent, tracestate); invalid when they carry none or tracing is
// off.
func Remote(h http.Header) trace.SpanContext {
	if !Enabled() || h.Get(HeaderTraceparent) == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.HeaderCarrier(h)))
}

// WithRemote is ctx with sc as the parent of the spans started from it
// (ctx itself when sc is invalid).
func WithRemote(ctx context.Context, sc trace.SpanContext) context.Context {
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Inject writes ctx's span context into h as traceparent (and
// tracestate); nothing when ctx holds no valid span context.
func Inject(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		w3c.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// Parse reads a traceparent value (the TRACEPARENT environment variable
// of a CLI): the span context it names, invalid when it is malformed.
func Parse(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	h := http.Header{}
	h.Set(HeaderTraceparent, traceparent)
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.HeaderCarrier(h)))
}

// Traceparent is ctx's span context as a traceparent value ("" when ctx
// holds none).
func Traceparent(ctx context.Context) string {
	h := http.Header{}
	Inject(ctx, h)
	return h.Get(HeaderTraceparent)
}
