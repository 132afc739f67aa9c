package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/oecp/oecp/tracing"
	"github.com/oecp/oecp/tracing/tracingtest"
)

// While tracing is off, starting and ending a span allocates nothing and
// leaves the context as it was.
func TestStartWhenOffAllocatesNothing(t *testing.T) {
	if tracing.Enabled() {
		t.Fatal("tracing is on before any Setup")
	}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := tracing.Start(ctx, "request")
		span.End()
		if c != ctx {
			t.Fatal("the context changed")
		}
		tracing.RunContext(ctx, "tenant", "run")
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per span while off", allocs)
	}
}

// A Config from no variables is off; an endpoint alone or otlp turns it
// on; none and OTEL_SDK_DISABLED keep it off; bad values are refused.
func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
		err  bool
	}{
		{"nothing", nil, false, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, true, false},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, false},
		{"otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, false},
		{"none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:1"}, false, false},
		{"disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false, false},
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, true},
		{"protocol", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, false, true},
		{"sampler", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "sometimes"}, false, true},
		{"ratio", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, false, true},
		{"queue", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_MAX_QUEUE_SIZE": "-1"}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tracing.FromEnv(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.err || (err == nil && c.On() != tc.on) {
				t.Fatalf("FromEnv: %+v, %v", c, err)
			}
		})
	}
}

// Two replicas (two providers, one after the other) that trace the same
// run put their spans in one trace, under one root span id, which the
// root span the second one ends carries; another tenant's run of the same
// id is another trace.
func TestRunIsOneTraceAcrossReplicas(t *testing.T) {
	replica := func(finish bool) tracetest.SpanStubs {
		r := tracingtest.Start(t)
		tracing.RunSeen("n:acme", "r1")
		_, span := tracing.Start(tracing.RunContext(context.Background(), "n:acme", "r1"), "execution write")
		span.End()
		if finish {
			tracing.RunFinished("n:acme", "r1", "succeeded", "")
		} else {
			tracing.RunDropped("n:acme", "r1")
		}
		return r.Spans()
	}
	first, second := replica(false), replica(true)
	if len(first) != 1 || len(second) != 2 {
		t.Fatalf("spans: %d on the first replica, %d on the second", len(first), len(second))
	}
	root := second[1]
	want := tracing.RunTraceID("n:acme", "r1")
	if root.Name != tracing.RootSpanName || root.SpanContext.TraceID() != want || root.Parent.IsValid() {
		t.Fatalf("root %q in %s under %v", root.Name, root.SpanContext.TraceID(), root.Parent)
	}
	for _, s := range []tracetest.SpanStub{first[0], second[0]} {
		if s.SpanContext.TraceID() != want || s.Parent.SpanID() != root.SpanContext.SpanID() {
			t.Fatalf("span %q in %s under %s; root %s", s.Name, s.SpanContext.TraceID(), s.Parent.SpanID(), root.SpanContext.SpanID())
		}
	}
	if tracing.RunTraceID("n:other", "r1") == want || tracing.RunTraceID("n:acme", "r2") == want {
		t.Fatal("another run shares the trace id")
	}
}

// A run another replica admitted keeps its whole duration in the root
// span of the replica that ends it: the root starts at the time the
// run's UUIDv7 id carries.
func TestTakenOverRunRootStartsAtItsCreation(t *testing.T) {
	r := tracingtest.Start(t)
	created := time.Now().Add(-90 * time.Second).Truncate(time.Millisecond)
	ms := created.UnixMilli()
	id := fmt.Sprintf("%08x-%04x-7abc-8def-0123456789ab", ms>>16, ms&0xffff)
	tracing.RunSeen("n:acme", id)
	tracing.RunFinished("n:acme", id, "succeeded", "")
	spans := r.Spans()
	if len(spans) != 1 || !spans[0].StartTime.Equal(created) {
		t.Fatalf("root spans %d, start %v, want %v", len(spans), spans[0].StartTime, created)
	}
}

// The root span links to the request that created the run and says when
// it was not admitted here.
func TestRunRootLinksToItsCreator(t *testing.T) {
	r := tracingtest.Start(t)
	ctx, submit := tracing.Start(context.Background(), "run/submit")
	tracing.RunCreated(ctx, "n:acme", "r1")
	submit.End()
	tracing.RunSeen("n:acme", "r1") // the engine sees it after: the admission's note stays
	tracing.RunFinished("n:acme", "r1", "failed", "node_failed")
	roots := r.Named(tracing.RootSpanName)
	if len(roots) != 1 || len(roots[0].Links) != 1 || roots[0].Links[0].SpanContext.SpanID() != submit.SpanContext().SpanID() {
		t.Fatalf("roots %+v", roots)
	}
	attrs := map[string]string{}
	for _, a := range roots[0].Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	if attrs["error.type"] != "node_failed" || attrs["oecp.run.status"] != "failed" || attrs["oecp.run.resumed"] != "" {
		t.Fatalf("root attributes %v", attrs)
	}
}

// blockingExporter holds every export until release is closed.
type blockingExporter struct {
	release chan struct{}
	mu      sync.Mutex
	got     int
}

func (b *blockingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	b.got += len(spans)
	b.mu.Unlock()
	return nil
}

func (b *blockingExporter) Shutdown(context.Context) error { return nil }

// A collector that does not answer never blocks whoever ends a span: past
// the queue's bound spans are dropped and counted; what was queued is
// exported once the collector answers.
func TestFullQueueDropsAndCounts(t *testing.T) {
	exp := &blockingExporter{release: make(chan struct{})}
	p := tracing.Install(exp, tracing.Config{QueueSize: 2, BatchSize: 1})
	before := tracing.Dropped()
	const n = 10
	for range n {
		_, span := tracing.Start(context.Background(), "work")
		span.End() // returns although the exporter holds the first batch
	}
	dropped := tracing.Dropped() - before
	// At most one batch is being exported and two spans queued.
	if dropped < n-3 {
		t.Fatalf("%d spans dropped of %d with a queue of 2", dropped, n)
	}
	close(exp.release)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exp.got+int(tracing.Dropped()-before) != n {
		t.Fatalf("%d exported + %d dropped of %d", exp.got, tracing.Dropped()-before, n)
	}
}

// A log line written in a span carries its trace_id and span_id, in text
// and JSON; one written without is unchanged.
func TestLogHandlerAddsTraceAndSpanIDs(t *testing.T) {
	tracingtest.Start(t)
	ctx, span := tracing.Start(context.Background(), "work")
	defer span.End()
	sc := span.SpanContext()
	for _, tc := range []struct {
		name string
		new  func(*bytes.Buffer) slog.Handler
	}{
		{"text", func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
		{"json", func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			log := slog.New(tracing.LogHandler(tc.new(&b))).With("component", "test")
			log.InfoContext(ctx, "in a span")
			log.Info("outside")
			lines := strings.Split(strings.TrimSpace(b.String()), "\n")
			if !strings.Contains(lines[0], sc.TraceID().String()) || !strings.Contains(lines[0], sc.SpanID().String()) ||
				!strings.Contains(lines[0], "trace_id") || strings.Contains(lines[1], "trace_id") {
				t.Fatalf("lines:\n%s", b.String())
			}
			if tc.name == "json" {
				var m map[string]any
				if err := json.Unmarshal([]byte(lines[0]), &m); err != nil || m["trace_id"] != sc.TraceID().String() || m["span_id"] != sc.SpanID().String() {
					t.Fatalf("JSON line %s: %v", lines[0], err)
				}
			}
		})
	}
}

// A traceparent header names the caller's span; spans started under it
// join the caller's trace.
func TestRemoteTraceparentJoinsTheCallersTrace(t *testing.T) {
	r := tracingtest.Start(t)
	caller := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	h := http.Header{}
	h.Set("Traceparent", caller)
	sc := tracing.Remote(h)
	_, span := tracing.Start(tracing.WithRemote(context.Background(), sc), "rpc", trace.WithSpanKind(trace.SpanKindServer))
	span.End()
	got := r.Spans()
	if len(got) != 1 || got[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || got[0].Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("spans %+v", got)
	}
	if p := tracing.Parse(caller); !p.Equal(sc) || tracing.Traceparent(trace.ContextWithSpanContext(context.Background(), p)) != caller {
		t.Fatalf("Parse %v, Traceparent %q", p, tracing.Traceparent(trace.ContextWithSpanContext(context.Background(), p)))
	}
}

// A ratio sampler decides on the run's trace id: the root and every span
// of the run are sampled alike, on every replica.
func TestRunIsSampledWhole(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	p := tracing.Install(exp, tracing.Config{Sampler: "parentbased_traceidratio", SamplerArg: "0.5"})
	defer p.Shutdown(context.Background())
	kept := 0
	for i := range 64 {
		id := "r" + string(rune('A'+i%26)) + string(rune('a'+i/26))
		_, span := tracing.Start(tracing.RunContext(context.Background(), "t", id), "execution")
		span.End()
		tracing.RunFinished("t", id, "succeeded", "")
		_ = p.ForceFlush(context.Background())
		switch n := len(exp.GetSpans()); n {
		case 0:
		case 2:
			kept++
		default:
			t.Fatalf("run %s: %d of its 2 spans sampled", id, n)
		}
		exp.Reset()
	}
	if kept == 0 || kept == 64 {
		t.Fatalf("%d of 64 runs sampled at 0.5", kept)
	}
}
