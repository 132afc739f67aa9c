package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oecp/oecp/engine/harness"
)

func TestHungProcessGroupKilledAtTimeout(t *testing.T) {
	f := newFake(t)
	// The agent starts a child that keeps stderr open, reports its pid,
	// and waits forever.
	f.write("agent.sh", "#!/bin/sh\nsleep 1000 &\necho \"child $!\" >&2\necho ready >&2\nwait\n")
	rec := &recorder{}
	ready := rec.await("out: ready")
	ctx := newDeadlineCtx()
	go func() { <-ready; ctx.expire() }()
	got := run(f.runner(), ctx, f.job(textStep(t), harness.Binding{Model: "m"}), `{"text":"draft"}`, rec)
	ctx.expire()
	if s := outcome(got); s != `{"status":"error","code":"timeout","reason":"declared_failure"}` {
		t.Fatalf("outcome %s", s)
	}
	waitDead(t, childPid(t, rec, "info: child "))
}

// childPid is the pid a hung agent reported in the line starting with
// prefix.
func childPid(t *testing.T, rec *recorder, prefix string) int {
	t.Helper()
	for _, l := range strings.Split(rec.text(), "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			if pid, err := strconv.Atoi(rest); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no child pid in\n%s", rec.text())
	return 0
}

// waitDead waits until pid no longer runs. Run returned only after the
// child's stderr closed, which sleep never does while alive; this waits
// for the kernel to finish its exit, which has no event to wait on.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	for i := 0; alive(pid); i++ {
		if i == 500 {
			t.Fatalf("child %d of the hung agent survived", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCancelledIsRefusal(t *testing.T) {
	f := newFake(t)
	f.write("agent.sh", "#!/bin/sh\necho ready >&2\nexec sleep 1000\n")
	rec := &recorder{}
	ready := rec.await("out: ready")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-ready; cancel() }()
	got := run(f.runner(), ctx, f.job(textStep(t), harness.Binding{Model: "m"}), `{"text":"draft"}`, rec)
	if s := outcome(got); s != `{"status":"error","code":"refusal","reason":"declared_failure"}` {
		t.Fatalf("outcome %s", s)
	}
}

// alive reports whether pid runs (exists and is not a zombie).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}
