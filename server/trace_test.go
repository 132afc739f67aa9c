package server_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/tracing"
	"github.com/oecp/oecp/tracing/tracingtest"
)

// serveFrames serves frames on one connection, one answer each, and
// closes it.
func serveFrames(t *testing.T, opts server.Options, inline bool, frames ...string) {
	t.Helper()
	tr := &memTransport{in: make(chan []byte, len(frames)), out: make(chan struct{}, len(frames))}
	d := &server.Dispatcher{Backend: server.EmptyBackend{}, InlineReads: inline}
	c := server.NewConn(d, tr, identity.Local(), opts)
	done := make(chan struct{})
	go func() { c.Serve(context.Background()); close(done) }()
	for _, f := range frames {
		tr.in <- []byte(f)
		testkit.Recv(t, tr.out)
	}
	close(tr.in)
	testkit.Recv(t, done)
}

// Each request is a server span named by its method, with rpc.system
// jsonrpc, a child of the span the connection's caller named; an error
// answer carries its code.
func TestRequestSpansJoinTheCallersTrace(t *testing.T) {
	for _, inline := range []bool{true, false} {
		r := tracingtest.Start(t)
		caller := tracing.Parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		serveFrames(t, server.Options{Caller: caller}, inline,
			`{"jsonrpc":"2.0","id":1,"method":"get","params":{}}`,
			`{"jsonrpc":"2.0","id":2,"method":"get","params":[]}`)
		spans := r.Spans()
		if len(spans) != 2 {
			t.Fatalf("inline %v: %d spans", inline, len(spans))
		}
		for i, s := range spans {
			a := map[string]string{}
			for _, kv := range s.Attributes {
				a[string(kv.Key)] = kv.Value.Emit()
			}
			if s.Name != "get" || s.SpanKind != trace.SpanKindServer || a["rpc.system"] != "jsonrpc" || a["rpc.method"] != "get" ||
				s.SpanContext.TraceID() != caller.TraceID() || s.Parent.SpanID() != caller.SpanID() {
				t.Fatalf("inline %v: span %d %+v", inline, i, s)
			}
			if i == 1 && (a["error.type"] != "INVALID_PARAMS" || a["rpc.jsonrpc.error_code"] != "-32602") {
				t.Fatalf("inline %v: error span attributes %v", inline, a)
			}
			if i == 0 && a["error.type"] != "" {
				t.Fatalf("inline %v: ok span attributes %v", inline, a)
			}
		}
	}
}

// Without a caller each request starts its own trace.
func TestRequestSpanWithoutCaller(t *testing.T) {
	r := tracingtest.Start(t)
	serveFrames(t, server.Options{}, false, `{"jsonrpc":"2.0","id":1,"method":"get","params":{}}`)
	spans := r.Spans()
	if len(spans) != 1 || spans[0].Parent.IsValid() {
		t.Fatalf("spans %v", spans)
	}
}

// The request path with tracing on, to compare with BenchmarkGetTask
// (tracing off).
func BenchmarkGetTaskTraced(b *testing.B) {
	p := tracing.Install(discard{}, tracing.Config{})
	defer p.Shutdown(context.Background())
	benchRequests(b, false, server.Options{})
}

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
