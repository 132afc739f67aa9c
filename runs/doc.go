// Package runs is the native run surface (run/submit, run/list,
// run/status, run/force, run/watch, run/logs, run/attach): many runs per
// tenant, each admitted from a RunSubmission (graph, initial input, runtime
// plan, source), recorded in the store next to the v1 clusters and driven
// by the same engine supervisor in the reducer's native mode.
//
// Admission is pure and effect-free: the submission is decoded strictly,
// checked against the native rules (full profile, single-attempt
// executables, a runtime plan that binds exactly the executables, the
// closed model catalogue, declared environments, writers that never overlap
// another execution) and then verified by the production verifier over a
// graph-local worker registry. The commit is one store transaction that
// answers a replayed submission, a run id or submission key conflict, or
// records the run and its admission record.
//
// Durable state per run: an immutable admission record (the run's store
// seed), a small mutable state record (phase, executions, terminal result,
// last cursor) and the run's event log in the store, whose global sequence
// is the opaque cursor "v2:N". Every record carries the run's status
// projection after it, so run/watch replays any cursor without folding;
// log lines are records too (batched per run) and run/logs replays and
// follows them. Live agent output (run/attach) is not stored: the replica
// running the execution keeps a window of it in memory and, on a store
// shared by several replicas, broadcasts it (relay.go), so a client
// attached to any replica follows it.
package runs
