package collectortest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// Collector is the Collector's OTLP receiver listening on loopback, gRPC
// and HTTP, into a sink the test reads.
type Collector struct {
	// GRPC and HTTP are the receiver's endpoints as oecp takes them
	// (http://127.0.0.1:port).
	GRPC, HTTP string
	sink       *consumertest.TracesSink
}

// Start starts the receiver; the test's cleanup stops it.
func Start(t *testing.T) *Collector {
	t.Helper()
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = grpcAddr
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = httpAddr
	c := &Collector{GRPC: "http://" + grpcAddr, HTTP: "http://" + httpAddr, sink: new(consumertest.TracesSink)}
	r, err := f.CreateTraces(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, c.sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	return c
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Span is one received span, flattened for assertions.
type Span struct {
	Name                    string
	TraceID, SpanID, Parent string
	Kind                    string
	Attrs                   map[string]string
	Links                   []string // linked span ids
	Error                   bool
	Resource                map[string]string
	Start, End              time.Time
}

// Spans is every span received so far.
func (c *Collector) Spans() []Span {
	var out []Span
	for _, td := range c.sink.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			res := attrs(rs.Resource().Attributes().AsRaw())
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					sp := Span{Name: s.Name(), TraceID: s.TraceID().String(), SpanID: s.SpanID().String(), Kind: s.Kind().String(),
						Attrs: attrs(s.Attributes().AsRaw()), Error: s.Status().Code() == ptrace.StatusCodeError, Resource: res,
						Start: s.StartTimestamp().AsTime(), End: s.EndTimestamp().AsTime()}
					if !s.ParentSpanID().IsEmpty() {
						sp.Parent = s.ParentSpanID().String()
					}
					for _, l := range s.Links().All() {
						sp.Links = append(sp.Links, l.SpanID().String())
					}
					out = append(out, sp)
				}
			}
		}
	}
	return out
}

func attrs(m map[string]any) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}
