package main

import (
	"testing"
)

// With TRACEPARENT set (and no tracing of its own) a client command's
// connections send it as it is; without, nothing.
func TestCLISendsTRACEPARENT(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("TRACEPARENT", tp)
	end := startCLITrace("get")
	c := &cli{server: "ws://127.0.0.1:7300/oecp"}
	o, err := c.dialOptions()
	end()
	if err != nil || o.Traceparent != tp {
		t.Fatalf("dial options %+v, %v", o, err)
	}
	t.Setenv("TRACEPARENT", "not-a-traceparent")
	setCLITraceparent("")
	defer startCLITrace("get")()
	if o, _ := c.dialOptions(); o.Traceparent != "" {
		t.Fatalf("a malformed TRACEPARENT was sent: %q", o.Traceparent)
	}
}

// --trace-url must be an http(s) URL with {traceId}.
func TestTraceURLFlag(t *testing.T) {
	for url, ok := range map[string]bool{"": true, "http://jaeger:16686/trace/{traceId}": true, "http://jaeger/trace/": false, "javascript:{traceId}": false} {
		if err := (traceConfig{url: url}).check(); (err == nil) != ok {
			t.Errorf("--trace-url %q: %v", url, err)
		}
	}
}
