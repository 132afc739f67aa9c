package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oecp/oecp/tracing"
)

// registerTracing adds the trace export's counters, read from the tracing
// package at each scrape (zero while tracing is off).
func registerTracing(reg *prometheus.Registry) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("trace_spans_dropped_total",
			"Spans that never reached the trace collector: the export queue was full, or their export failed or timed out.")),
			func() float64 { return float64(tracing.Dropped()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("trace_spans_exported_total", "Spans the trace collector accepted.")),
			func() float64 { return float64(tracing.Exported()) }))
}
