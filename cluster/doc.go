// Package cluster is the OECP v1 cluster backend: admission (plan, apply,
// get), the operator lifecycle (update, stop, retry, resubmit, delete),
// durable watch, and the live logs and agent/attach subscriptions, behind
// the server.Backend interface and over the transactional store.Store port.
//
// Every mutation is one store transaction in which the idempotency replay,
// the generation and run compare-and-set and the phase checks run before
// anything is written, in the exact per-method precedence of spec/01 §4; a
// rejected request changes nothing and a committed one is never rolled
// back. Each durable record appends exactly one event, whose store
// sequence is its opaque cursor ("cursor-N") and whose notification tail is
// encoded once at commit and shared by every watcher.
//
// Tenancy: one cluster per connection tenant (Isolated) or one for all
// (Shared); a tenant can never read, watch or change another's cluster.
//
// The in-process Engine API (engine.go) is how an execution engine drives
// runs (dispatch leases, settlements, faults, cleanup, logs, attach output)
// and how tests inject the events of the hook-dependent goldens.
package cluster
