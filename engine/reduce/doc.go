// Package reduce is the pure reducer of the engine: verified graph +
// initial input + recorded history → the decisions that move the run on
// (dispatch, void_loser, hold) and its terminal result. It implements the
// runtime semantics of graphs (state flow, copy-in/copy-out scoping,
// bindings, promotion, every node kind and join, controls and guards,
// occurrences, history consistency, terminal result) with this attempts
// and hold policy:
//
//   - attempts are a budget per visit: every visit of an executable (each
//     loop iteration, each map item) may be dispatched up to `attempts`
//     times; an error outcome is re-dispatched with attempt+1 until the
//     budget is used up;
//   - an exhausted failure whose `error` control some guard of the graph
//     reads is routed (the error control is set, nothing is written, and
//     the flow continues); otherwise that path holds: Reduce emits a hold
//     decision naming the failed execution and dispatches nothing after it.
//     A RetryGrant for that execution adds one attempt to the visit.
//
// ReduceNative is the native runs' mode: every visit is dispatched once,
// nothing holds, and a failure no guard reads still sets the node's
// `error` control and lets the flow continue, so a native run always
// reaches a terminal.
//
// Reduce has no I/O, no goroutines and no clock; it re-evaluates the whole
// graph from the root on every call, so where the run is comes entirely from
// the history, whose order does not matter. Values are JSON trees decoded
// with UseNumber and emitted as canonical JSON (sorted keys), so decisions
// are deterministic bytes.
package reduce
