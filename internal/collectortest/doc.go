// Package collectortest is a test-only module: it receives oecp's spans
// with the OpenTelemetry Collector's own OTLP receiver (gRPC and HTTP), so
// the end-to-end tests of tracing read what a real collector would. It is
// a module of its own to keep the Collector's dependencies out of oecp's:
// run its tests from this directory (`go test -race ./...`).
package collectortest
