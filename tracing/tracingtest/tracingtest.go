// Package tracingtest records the spans of a test in memory.
package tracingtest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oecp/oecp/tracing"
)

// Recorder holds the spans ended since Start.
type Recorder struct {
	exp *tracetest.InMemoryExporter
	p   *tracing.Provider
}

// Start turns tracing on for the test, into memory; the test's cleanup
// turns it off. Tests that use it must not run in parallel with others
// that trace.
func Start(t testing.TB) *Recorder {
	t.Helper()
	r := &Recorder{exp: tracetest.NewInMemoryExporter()}
	r.p = tracing.Install(r.exp, tracing.Config{})
	t.Cleanup(func() { _ = r.p.Shutdown(context.Background()) })
	return r
}

// Spans flushes the queue and returns every span ended so far.
func (r *Recorder) Spans() tracetest.SpanStubs {
	_ = r.p.ForceFlush(context.Background())
	return r.exp.GetSpans()
}

// Named returns the spans named name.
func (r *Recorder) Named(name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range r.Spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}
