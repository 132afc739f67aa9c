package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page.
const hugePage = 2 << 20

// Why pasta starts on huge pages: its tables are zero-filled data (bss),
// tens of megabytes that it writes at its start. On small pages that is
// one page fault per 4 KiB, thousands of them, most of what configuring a
// namespace costs. Started stopped at its exec (ptrace), pasta is made to
// call madvise(MADV_HUGEPAGE) on that data before its first instruction
// (remoteMadvise), as a program may for its own memory; its faults then
// take a 2 MiB page each, only where it writes. Nothing pasta sees
// changes: its instruction and registers are put back before it runs.

// pastaProgram is the program to run for pasta at path. Debian's passt
// has a build for CPUs with AVX2 beside it (path.avx2), which a pasta
// started on such a CPU executes at once; started directly, it is one
// exec less and it is the image whose data is made huge.
func pastaProgram(path string) string {
	real, err := filepath.EvalSymlinks(path)
	if err != nil || !cpu.X86.HasAVX2 || strings.HasSuffix(real, ".avx2") {
		return path
	}
	if st, err := os.Stat(real + ".avx2"); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return real + ".avx2"
	}
	return path
}

// startHuge starts the command newCmd returns, stopped at its exec, has
// it advise the kernel that its zero-filled data is for huge pages, and
// lets it run; sched (nil: none) schedules it from before it runs. Where
// the kernel refuses (ptrace, madvise, another architecture), the command
// runs on small pages, and h stops trying for later commands. newCmd is
// called again when the first command did not start; the error is the
// start's.
func (h *Host) startHuge(newCmd func() *exec.Cmd, sched *aheadSched) (*exec.Cmd, error) {
	if h.noHuge.Load() {
		cmd := newCmd()
		err := cmd.Start()
		if err == nil {
			sched.started(cmd.Process.Pid)
		}
		return cmd, err
	}
	// ptrace requests come from the thread that started the tracee.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := newCmd()
	pdeathsig(cmd) // SysProcAttr is set
	cmd.SysProcAttr.Ptrace = true
	if err := cmd.Start(); err != nil {
		// When it starts untraced, tracing was what failed.
		cmd = newCmd()
		if err := cmd.Start(); err != nil {
			return cmd, err
		}
		h.hugeRefused("ptrace", err)
		sched.started(cmd.Process.Pid)
		return cmd, nil
	}
	pid := cmd.Process.Pid
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		// Killed before its exec's stop (and reaped here), or not waited
		// for: it must not stay stopped; the caller sees it end.
		_ = cmd.Process.Kill()
		return cmd, nil
	}
	sig := 0
	if ws.StopSignal() == unix.SIGTRAP { // the exec's stop
		var err error
		sig, err = hugeData(pid)
		switch {
		case errors.Is(err, errTraceeLost):
			_ = cmd.Process.Kill()
			return cmd, nil
		case errors.Is(err, errInterrupted): // this one runs on small pages
		case err != nil:
			h.hugeRefused("madvise", err)
		}
	} else {
		sig = int(ws.StopSignal())
	}
	// Stopped, so not reaped: pid is still its own.
	sched.started(pid)
	// A signal that stopped it on the way is delivered as it goes on.
	if err := ptraceDetach(pid, sig); err != nil {
		_ = cmd.Process.Kill() // it died meanwhile
	}
	return cmd, nil
}

// Errors of remoteMadvise that are not the kernel's refusal.
var (
	// errInterrupted: a signal stopped the process before the call; its
	// state is put back, the signal is to be delivered at the detach.
	errInterrupted = errors.New("a signal came before the system call")
	// errTraceeLost: the process ended, or its state could not be put
	// back; it is to be killed.
	errTraceeLost = errors.New("the traced process was lost")
)

// ptraceDetach lets tracee pid go on, delivering signal sig (0: none).
func ptraceDetach(pid, sig int) error {
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(pid), 0, uintptr(sig), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// hugeRefused turns huge pages off for h's later commands.
func (h *Host) hugeRefused(what string, err error) {
	if !h.noHuge.Swap(true) {
		h.log.Info("sandbox: pasta starts on small pages", "refused", what, "err", err)
	}
}

// hugeData has process pid, stopped at its exec, advise the kernel that
// its anonymous writable mappings (then: its zero-filled data) are for
// huge pages. sig is a signal that stopped it meanwhile (errInterrupted),
// to be delivered at the detach.
func hugeData(pid int) (sig int, err error) {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, err
	}
	s := bufio.NewScanner(bytes.NewReader(maps))
	for s.Scan() {
		var lo, hi uintptr
		f := strings.Fields(s.Text())
		if len(f) != 5 || f[1] != "rw-p" || f[4] != "0" {
			continue // a file's, or named ([stack], [heap])
		}
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil {
			return 0, err
		}
		if hi-lo < hugePage {
			continue
		}
		if sig, err := remoteMadvise(pid, lo, hi-lo, unix.MADV_HUGEPAGE); err != nil {
			return sig, err
		}
	}
	return 0, s.Err()
}
