// Package cluster is the OECP v1 cluster backend: admission (plan, apply,
// get), the operator lifecycle (update, stop, retry, resubmit, delete),
// durable watch, and the live logs and agent/attach subscriptions, behind
// the server.Backend interface, over a transactional store.Store and a
// Verifier (both ports it consumes).
//
// Every mutation is one store transaction in which the idempotency replay,
// the generation and run compare-and-set and the phase checks run before
// anything is written, in the protocol's per-method precedence; a rejected
// request changes nothing and a committed one is never rolled back. Each
// durable record appends exactly one event, whose store sequence is its
// opaque cursor ("cursor-N") and whose notification tail is encoded once at
// commit and shared by every watcher.
//
// Tenancy: one cluster per connection tenant (Isolated) or one for all
// (Shared); a tenant can never read, watch or change another's cluster.
//
// An execution engine drives runs through the backend's Ledger (the
// engine.Ledger port): executions, their settlements, holds and the run's
// result are recorded in the tenant's state and the run's execution log
// (log.go), fenced by the run's supervision lease, and their live output
// feeds logs and agent/attach.
// Nothing of it is reachable over the wire.
//
// Where it differs from the reference on purpose: update on an empty
// cluster is INVALID_PHASE {currentPhase: empty} (not an internal error);
// fromCursor is exclusive, and a cursor outside the resolved run's
// retained history is NOT_FOUND; a slow watch consumer is noticed at its
// next read of the durable backlog, after it received the events a bounded
// queue would have held; every record of the current run advances
// atCursor; delete tombstones every run admitted since the cluster was
// last empty.
package cluster
