// Package server is the transport-neutral OECP connection core and the
// method dispatcher. A binding (transport/ndjson, transport/websocket)
// hands it frames through the Transport interface.
//
// The core (Conn) reads frames on one reader goroutine, in arrival order,
// and applies the admission rules there: cancels, duplicate ids, task
// slots, envelope errors. What it admits runs on its own goroutine, one
// per request or subscription, except run/submit: a connection runs at
// most MaxRunningSubmits of those at once and queues the rest, in frame
// order, without a goroutine each. A subscription whose stream can be
// woken (ParkingStream) gives up its goroutine whenever it waits, and a
// wake-up starts another. All of that in-flight state (ids,
// slots, subscriptions, the submission queue) is one value changed in one
// critical section. Answers and notifications go out
// through one bounded outbound queue: whichever goroutine finds the
// connection idle writes its frame in place, otherwise the frame is
// queued for the current writer, so at most one goroutine writes at a
// time. Frames the reader answers itself (errors, and initialize and get
// when the dispatcher answers them in place) keep frame order; the reader
// writes them in place only through a transport that never waits on the
// peer (NoWaitWriter), else queues them: it never waits on the peer. It
// holds its answers until it next waits for input, so the answers to
// frames that arrived together leave in one write.
//
// The Dispatcher routes requests through a method table to a Backend, with
// one error precedence for every method. The package knows nothing of sockets
// or stdio, and nothing of how a backend stores clusters.
package server
