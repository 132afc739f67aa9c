// Package tracing is the one door to OpenTelemetry traces: every other
// package starts its spans here and never imports the SDK. Tracing is off
// by default and free when off: Start then returns the caller's context
// and a no-op span after one atomic load, and allocates nothing. Setup
// turns it on from the standard OTEL_* variables (or oecp serve's
// --trace-* flags), exporting over OTLP (gRPC or HTTP/protobuf) through a
// bounded, non-blocking queue: a collector that is down or slow costs the
// spans it cannot take (counted, Dropped), never a run's time.
//
// A run is one trace wherever it runs: its trace id and its root span id
// are derived from the run (RunTraceID), so a replica that continues a
// run parents its spans on the same root without reading anything.
package tracing
