package engine

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"

	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
)

// superseded is one run this supervisor claimed but has lost to another
// process without knowing it yet (it was stopped past its lease): the
// run's snapshot shows the new owner's execution active, with the process
// group the new owner recorded, and every write of this supervisor is
// refused by its fence.
type superseded struct {
	versioned
	group   worker.Group
	crashes int
}

func (l *superseded) Snapshot(ctx context.Context, ref RunRef) (*Snapshot, error) {
	snap, err := l.versioned.Snapshot(ctx, ref)
	if err != nil {
		return nil, err
	}
	snap.History.Executions = []reduce.Execution{{Execution: 1, NodeInstance: 1, Attempt: 1,
		Occurrence: reduce.Occurrence{Node: "s"}, State: reduce.StateActive}}
	snap.KeepGroup(1, &l.group)
	return snap, nil
}

func (l *superseded) Crash(context.Context, RunRef, []uint64) error {
	l.crashes++
	return fmt.Errorf("%w: lease lost (now owner \"new-owner\")", ErrStale)
}

// TestStaleOwnerNeverKillsTheNewOwnersExecution: a supervisor that lost a
// run without knowing it takes the new owner's running execution for an
// orphan; its crash write is refused by the fence, and the process group
// the new owner recorded is not touched (it was SIGKILLed before the
// refused write).
func TestStaleOwnerNeverKillsTheNewOwnersExecution(t *testing.T) {
	cmd := exec.Command("sleep", "3600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	g, err := worker.ProbeGroup(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	l := &superseded{versioned: versioned{version: 1}, group: g}
	s := New(l, nil, nil)
	s.reconcileAll(context.Background())
	if l.crashes != 1 {
		t.Fatalf("%d crash writes, want the one the fence refused", l.crashes)
	}
	if st := testkit.ProcState(cmd.Process.Pid); st == "" || st == "Z" {
		t.Fatalf("the new owner's process was killed by a supervisor that had lost the run (state %q)", st)
	}
}
