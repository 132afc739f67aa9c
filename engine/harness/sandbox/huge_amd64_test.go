package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// stackFlags returns the start of stopped process pid's stack mapping and
// the kernel's flags for it (smaps' VmFlags).
func stackFlags(t *testing.T, pid int) (uintptr, uintptr, []string) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lo, hi uintptr
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if strings.HasSuffix(line, "[stack]") {
			if _, err := fmt.Sscanf(line, "%x-%x", &lo, &hi); err != nil {
				t.Fatal(err)
			}
		}
		if v, ok := strings.CutPrefix(line, "VmFlags:"); ok && lo != 0 {
			return lo, hi, strings.Fields(v)
		}
	}
	t.Fatalf("no stack mapping: %v", s.Err())
	return 0, 0, nil
}

// remoteMadvise makes the stopped process call madvise as asked, reports
// the kernel's refusal as its errno, and either way leaves the process to
// run on as it would have: here a shell that exits 7.
func TestRemoteMadviseLeavesTheProcessAsItWas(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd, pid := tracedShell(t)
	lo, hi, flags := stackFlags(t, pid)
	if slices.Contains(flags, "hg") {
		t.Fatalf("the stack is for huge pages before any madvise: %v", flags)
	}
	if _, err := remoteMadvise(pid, lo, hi-lo, 12345); !errors.Is(err, unix.EINVAL) {
		t.Errorf("madvise with no such advice: %v, want EINVAL", err)
	}
	if _, err := remoteMadvise(pid, lo, hi-lo, unix.MADV_HUGEPAGE); err != nil {
		t.Fatal(err)
	}
	if _, _, flags := stackFlags(t, pid); !slices.Contains(flags, "hg") {
		t.Errorf("after madvise(MADV_HUGEPAGE) the stack's flags are %v", flags)
	}
	if err := unix.PtraceDetach(pid); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("the shell ended with %v, want exit status 7", err)
	}
}

// tracedShell starts a shell that exits 7, stopped at its exec as this
// thread's tracee (the caller has locked its goroutine to the thread).
func tracedShell(t *testing.T) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "exit 7")
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Skipf("this host does not let a process be traced: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var ws unix.WaitStatus
	if _, err := unix.Wait4(cmd.Process.Pid, &ws, 0, nil); err != nil || !ws.Stopped() || ws.StopSignal() != unix.SIGTRAP {
		t.Fatalf("not stopped at its exec: %v %v", ws, err)
	}
	return cmd, cmd.Process.Pid
}

// A signal sent to the stopped process comes before the injected call:
// remoteMadvise calls nothing, puts the process back, and returns the
// signal, which the detach delivers: the shell dies of it (no handler is
// set at its exec) instead of exiting 7 as if it never came.
func TestRemoteMadviseInterruptedKeepsTheSignal(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd, pid := tracedShell(t)
	lo, hi, _ := stackFlags(t, pid)
	if err := unix.Kill(pid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	sig, err := remoteMadvise(pid, lo, hi-lo, unix.MADV_HUGEPAGE)
	if !errors.Is(err, errInterrupted) || sig != int(unix.SIGUSR1) {
		t.Fatalf("remoteMadvise with SIGUSR1 pending: %d, %v", sig, err)
	}
	if _, _, flags := stackFlags(t, pid); slices.Contains(flags, "hg") {
		t.Errorf("madvise was called although the signal came first: %v", flags)
	}
	if err := ptraceDetach(pid, sig); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the shell ended with %v", err)
	}
	if st := exit.Sys().(syscall.WaitStatus); !st.Signaled() || st.Signal() != syscall.SIGUSR1 {
		t.Fatalf("the shell ended with %v, want killed by SIGUSR1", err)
	}
}
