package sandbox

import "fmt"

// Limits an execution can hit, as log lines name them: each is the oecp
// serve flag that sets it.
const (
	LimitProcs  = "agent-max-procs"
	LimitMemory = "agent-max-memory"
	LimitDisk   = "agent-max-disk"
)

// The bounds oecp serve puts on every agent execution unless told
// otherwise (0 or none turns one off). They are sized for a coding agent
// that builds a project and runs its test suite, and stop a runaway one
// long before it takes the host with it.
const (
	// DefaultMaxProcs counts processes and threads alike (cgroup pids):
	// a parallel build or test run on a large host (go test on 64 cores:
	// a compiler or test binary per core, each with dozens of threads; a
	// JVM's hundreds) stays under it, and a fork bomb stops at an eighth
	// of the common pid_max of 32768.
	DefaultMaxProcs = 4096
	// DefaultMaxMemory is memory and tmpfs pages together (cgroup
	// memory; the sandbox's /tmp is memory): a large project's build and
	// test suite (a linker, a JVM's default heap, a bundler) peaks at a
	// few GiB, and the OOM killer acts inside the execution before a host
	// of 16 GiB or more runs short.
	DefaultMaxMemory = 8 << 30
	// DefaultMaxDisk bounds what a run's directories take on disk (its
	// workspace, git directory and the execution's home): a large clone,
	// its dependencies (node_modules, a module cache) and build output
	// (a Rust target directory) fit; filling the disk does not.
	DefaultMaxDisk = 10 << 30
)

// CanLimit reports whether this host can enforce limit (LimitProcs or
// LimitMemory) as New would: nil, or what is missing. LimitDisk needs
// nothing of the host.
func CanLimit(limit string) error {
	var err error
	switch limit {
	case LimitProcs:
		_, err = newCgroups(1, 0)
	case LimitMemory:
		_, err = newCgroups(0, 1<<30)
	case LimitDisk:
	default:
		err = fmt.Errorf("no limit %q", limit)
	}
	return err
}
