// Package runs is the native run surface (run/submit, run/list, run/status,
// run/force, run/harnesses, run/watch, run/logs, run/attach, and the run
// exports served over HTTP): many runs per tenant, each admitted from a
// RunSubmission (graph, initial input, runtime plan, source), recorded in
// the store next to the v1 clusters and driven by the same engine
// supervisor, through this package's Ledger, in the reducer's native mode.
// What a run needs from its host (agent harnesses, git workspaces,
// delivery, checkpoints) it reaches through the ports of ports.go and
// checkpoints.go, which package capsule implements.
//
// Admission is pure and effect-free: the submission is decoded strictly,
// checked against the native rules (full profile, single-attempt
// executables, a runtime plan that binds exactly the executables, the
// closed model catalogue, declared environments, writers that never overlap
// another execution) and then verified by the production verifier over a
// graph-local worker registry (package nativegraph); a graph's decoding
// and its acceptance are kept by their wire bytes (package
// runs/graphcache). The commit, one change of the group commit (group.go)
// inside one store transaction, answers a replayed submission, a run id
// or submission key conflict, or records the run and its admission record.
//
// Durable state per run: an immutable admission record (the run's store
// seed), a small mutable state record (phase, executions, terminal result,
// last cursor, spending: the store's run state, versioned against lost
// updates, written under the run's lease like every write of the run;
// kept decoded by package runs/statecache), the
// latest workspace checkpoint (the store's checkpoint of the run), and the
// run's event log in the store, whose global sequence is the opaque cursor
// "v2:N". The store's indexes list the runs: a tenant's
// (the inventory, by admission cursor), every unfinished run (what the
// engine supervises, by latest cursor), the finished and deleted runs (by
// time, for retention) and each tenant's count of unfinished runs (the
// quota); Upgrade moves the indexes an earlier release kept in cluster
// records into them (upgrade.go). Every record carries the run's status
// projection after it, so run/watch replays any cursor without folding; log
// lines are records too, buffered per run until a write of the run takes
// them (package runs/logbuf), and run/logs replays and follows them. The
// raw evidence of its agent processes (the exact prompts and every byte
// they wrote) is kept with the run in the store's evidence,
// recorded by package runs/evidence and read back by its
// exports (runexport.go, through the writers of package runs/export).
// Live agent output (run/attach) is not stored as such: the replica
// running the execution keeps a window of it in memory and, on a store
// shared by several replicas, broadcasts it, so a client attached to any
// replica follows it (package runs/live). Retention deletes the runs that
// finished longer ago than the host keeps them (retention.go).
//
// The Backend holds the wiring: it owns the evidence recorder, the live
// hub and relay and the log buffer, and hands them their keys; the sub-packages import
// nothing of this package and read none of a run's records.
package runs
