package sandbox

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// A pasta made ahead runs at idle priority from its start until it is
// hurried (a run waits for it, or it is made), at normal priority after,
// for good; hurried before its start, it never runs at idle priority. A
// nil schedule leaves the process as it is.
func TestAheadSchedIdleUntilHurried(t *testing.T) {
	policy := func(pid int) uint32 {
		t.Helper()
		attr, err := unix.SchedGetAttr(pid, 0)
		if err != nil {
			t.Fatal(err)
		}
		return attr.Policy
	}
	child := func() int {
		t.Helper()
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd.Process.Pid
	}

	s, pid := &aheadSched{}, child()
	s.started(pid)
	if got := policy(pid); got != unix.SCHED_IDLE {
		t.Fatalf("a pasta made ahead starts at policy %d, want SCHED_IDLE", got)
	}
	s.hurry()
	if got := policy(pid); got != unix.SCHED_NORMAL {
		t.Fatalf("hurried, it runs at policy %d, want SCHED_NORMAL", got)
	}
	s.hurry() // no process of its own any more: nothing changes
	if got := policy(pid); got != unix.SCHED_NORMAL {
		t.Fatalf("hurried twice, policy %d", got)
	}

	early, pid := &aheadSched{}, child()
	early.hurry()
	early.started(pid)
	if got := policy(pid); got != unix.SCHED_NORMAL {
		t.Fatalf("hurried before its start, it runs at policy %d, want SCHED_NORMAL", got)
	}

	var none *aheadSched
	pid = child()
	none.started(pid)
	none.hurry()
	if got := policy(pid); got != unix.SCHED_NORMAL {
		t.Fatalf("with no schedule, policy %d", got)
	}
}
