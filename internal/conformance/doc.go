// Package conformance holds the end-to-end conformance tests: the golden
// transcripts replayed byte for byte over every binding (in-process
// NDJSON, a real `oecp serve --stdio` process, loopback WebSocket), and
// black-box tests of the built binary. It has no non-test code.
package conformance
