package capsule_test

import (
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/tracing"
	"github.com/oecp/oecp/tracing/tracingtest"
)

// A v1 cluster run is one trace: its root span, with error.type = its
// failure reason, and one span per execution under it, each failed one
// carrying its outcome code.
func TestClusterRunIsOneTrace(t *testing.T) {
	r := tracingtest.Start(t)
	e := start(t, capsule.Options{})
	run := e.apply(spec(seq("main",
		step("boom", "builtin.fail@1", attempts(2)),
		choice("route", succeedText("fine"), when(onError("boom", "crash"), failWith("crashed", "boomCrashed"))),
	)), hi)
	wantTerminal(t, e.waitFinished(), "failed", "boomCrashed")
	_ = e.c.Close() // the engine has ended every span
	attrs := func(s tracetest.SpanStub) map[string]string {
		m := map[string]string{}
		for _, a := range s.Attributes {
			m[string(a.Key)] = a.Value.Emit()
		}
		return m
	}
	roots := r.Named(tracing.RootSpanName)
	if len(roots) != 1 {
		t.Fatalf("%d root spans", len(roots))
	}
	root := roots[0]
	if a := attrs(root); a["oecp.run.id"] != *run.RunID || a["error.type"] != "boomCrashed" || a["oecp.run.status"] != "failed" {
		t.Fatalf("root attributes %v, links %v", a, root.Links)
	}
	execs := r.Named("step boom")
	if len(execs) != 2 {
		t.Fatalf("%d executions of boom traced", len(execs))
	}
	for _, s := range execs {
		if s.Parent.SpanID() != root.SpanContext.SpanID() || s.SpanContext.TraceID() != root.SpanContext.TraceID() {
			t.Fatalf("execution %v is not under the root", s.SpanContext)
		}
		if a := attrs(s); a["error.type"] != "crash" || a["oecp.outcome"] != "crash" {
			t.Fatalf("execution attributes %v", a)
		}
	}
}
