package sandbox

import (
	"bufio"
	"bytes"
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
// lets it run. Where the kernel refuses (ptrace, madvise, another
// architecture), the command runs on small pages, and h stops trying for
// later commands. newCmd is called again when the first command did not
// start; the error is the start's.
func (h *Host) startHuge(newCmd func() *exec.Cmd) (*exec.Cmd, error) {
	if h.noHuge.Load() {
		cmd := newCmd()
		return cmd, cmd.Start()
	}
	// ptrace requests come from the thread that started the tracee.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := newCmd()
	pdeathsig(cmd) // SysProcAttr is set
	cmd.SysProcAttr.Ptrace = true
	if err := cmd.Start(); err != nil {
		h.hugeRefused("ptrace", err)
		cmd = newCmd()
		return cmd, cmd.Start()
	}
	pid := cmd.Process.Pid
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		// Killed before its exec's stop (the server's death): it runs
		// nothing more; the caller sees it exit.
		return cmd, nil
	}
	if err := hugeData(pid); err != nil {
		h.hugeRefused("madvise", err)
	}
	_ = unix.PtraceDetach(pid) // fails only when it was killed since
	return cmd, nil
}

// hugeRefused turns huge pages off for h's later commands.
func (h *Host) hugeRefused(what string, err error) {
	if !h.noHuge.Swap(true) {
		h.log.Info("sandbox: pasta starts on small pages", "refused", what, "err", err)
	}
}

// hugeData has process pid, stopped at its exec, advise the kernel that
// its anonymous writable mappings (then: its zero-filled data) are for
// huge pages.
func hugeData(pid int) error {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return err
	}
	s := bufio.NewScanner(bytes.NewReader(maps))
	for s.Scan() {
		var lo, hi uintptr
		f := strings.Fields(s.Text())
		if len(f) != 5 || f[1] != "rw-p" || f[4] != "0" {
			continue // a file's, or named ([stack], [heap])
		}
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil {
			return err
		}
		if hi-lo < hugePage {
			continue
		}
		if err := remoteMadvise(pid, lo, hi-lo, unix.MADV_HUGEPAGE); err != nil {
			return err
		}
	}
	return s.Err()
}
