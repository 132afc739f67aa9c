package metrics

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/tracing"
)

// failing refuses every export, as a collector that is down does.
type failing struct{}

func (failing) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return context.DeadlineExceeded
}
func (failing) Shutdown(context.Context) error { return nil }

// Spans a collector did not take are counted on /metrics.
func TestDroppedSpansAreCounted(t *testing.T) {
	m := New()
	read := func() float64 {
		n, ok := testkit.Counter(t, m.Registry(), "oecp_trace_spans_dropped_total", nil)
		if !ok {
			t.Fatal("no oecp_trace_spans_dropped_total")
		}
		return n
	}
	before := read()
	p := tracing.Install(failing{}, tracing.Config{})
	_, span := tracing.Start(context.Background(), "work")
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := read() - before; got != 1 {
		t.Fatalf("%v spans counted dropped, want 1", got)
	}
}
