package sandbox

import (
	"sync"

	"golang.org/x/sys/unix"
)

// aheadSched is the scheduling of the pasta of a namespace made ahead:
// idle priority (SCHED_IDLE, run only on a CPU nothing else wants) from
// its start until the namespace is made or a run waits for it, normal
// priority after. A nil *aheadSched is a namespace made for a run that
// waits for it: its pasta keeps the server's priority.
type aheadSched struct {
	mu sync.Mutex
	// pid is pasta's, from its start until hurry, never after pasta was
	// waited for (so never another process's).
	pid     int
	hurried bool
}

// started lowers pasta's process pid, not yet waited for (so its own),
// to idle priority, unless hurry came first. Where the kernel refuses, pasta
// keeps normal priority.
func (s *aheadSched) started(pid int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hurried || setPolicy(pid, unix.SCHED_IDLE) != nil {
		return
	}
	s.pid = pid
}

// hurry raises pasta to normal priority, for good: call it when a run
// waits for the namespace, when the namespace is made, and before pasta is
// waited for.
func (s *aheadSched) hurry() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hurried = true
	if s.pid != 0 {
		_ = setPolicy(s.pid, unix.SCHED_NORMAL) // an exited pasta has no priority to raise
		s.pid = 0
	}
}

// setPolicy sets the scheduling policy of process pid's main thread, at
// nice 0.
func setPolicy(pid int, policy uint32) error {
	return unix.SchedSetAttr(pid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: policy}, 0)
}
