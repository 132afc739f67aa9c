// Package server is the transport-neutral OECP connection core and the
// method dispatcher. A binding (transport/ndjson, transport/websocket)
// hands it frames through the Transport interface; it applies the
// admission rules (duplicate ids, task slots, cancellation), routes
// requests through the Dispatcher to a Backend with the reference's error
// precedence, and writes answers and notifications through one bounded
// outbound queue and one writer goroutine. It knows nothing of sockets or
// stdio, and nothing of how a backend stores clusters.
package server
