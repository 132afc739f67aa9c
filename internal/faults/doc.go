// Package faults is the fault suite: black-box tests that break a real
// `oecp serve` the way production breaks it (SIGKILL and SIGTERM mid-run,
// a disk that fills up, a database that cannot be written or is damaged)
// and check what a user sees afterwards. A randomized SIGKILL test drives
// concurrent idempotent mutations through kill/restart cycles; run it
// longer with -faults.soak=N or OECP_SOAK_CYCLES=N. It has no non-test
// code.
package faults
