package replicas

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oecp/oecp/capsule"
)

// procAlive reports whether pid names a live process (not a zombie).
func procAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// TestStoppedPastItsLeaseReplicaStandsDown: the replica running step two
// of an agent run is stopped (SIGSTOP) past its lease; another replica
// takes the run over and runs step two again. When the stopped replica
// resumes it learns it lost the run (at its renewal, or when its fenced
// write is refused) and stands down: it does not kill the new owner's
// agent (it took it for an orphan and SIGKILLed its process group), and
// writes nothing more for the run — not the end record of the execution
// it lost. The run finishes on the new owner.
func TestStoppedPastItsLeaseReplicaStandsDown(t *testing.T) {
	cl, _, holder := stepTwoRunning(t, 2, leaseTTL, "agents-stop")
	stale := cl.replicas[holder].Cmd.Process
	must(t, stale.Signal(syscall.SIGSTOP))
	again := cl.started(t) // the other replica runs step two again
	must(t, stale.Signal(syscall.SIGCONT))
	guard := time.After(2 * time.Minute)
	cl.logs[holder].waitFor(t, "lost the claim of a run", guard)
	if !procAlive(again) {
		t.Fatalf("the new owner's agent %d was killed by the replica that lost the run", again)
	}
	cl.release(t, again)
	s := dial(t, cl.replicas[1-holder])
	evs := finish(t, s, "agents-stop")
	twos := executionsOf(evs, "two")
	if len(twos) != 2 {
		t.Fatalf("executions of step two %v, want the lost one and its rerun", twos)
	}
	cl.delivered(t, evs)
	lines := logLines(t, s, "agents-stop")
	for _, l := range lines {
		if strings.HasPrefix(l, twos[0]+": "+capsule.EndRecordPrefix) {
			t.Fatalf("the replica that lost the run wrote for it: %q\nlogs:\n%s", l, strings.Join(lines, "\n"))
		}
	}
	if !hasLine(lines, twos[0]+": this execution was running on a server that was lost") {
		t.Fatalf("logs:\n%s", strings.Join(lines, "\n"))
	}
}

// TestKilledReplicaNoticedBeforeItsLeaseExpires: the replica running
// step two is killed (SIGKILL) under a 60 s lease. The database ends its
// sessions, and with them the lock that said it lived: the other replica
// takes the run over well before the lease would have expired, runs step
// two again and finishes the run.
func TestKilledReplicaNoticedBeforeItsLeaseExpires(t *testing.T) {
	takenOverBeforeExpiry(t, "agents-dead", syscall.SIGKILL, "killed", "lost")
}
