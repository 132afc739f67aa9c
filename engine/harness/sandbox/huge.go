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
	"unsafe"

	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page.
const hugePage = 2 << 20

// Why pasta starts on huge pages: its tables are zero-filled data (bss),
// tens of megabytes that it writes at its start. On small pages that is
// one page fault per 4 KiB, thousands of them, most of what configuring a
// namespace costs. Started stopped at its exec (ptrace), with each whole
// 2 MiB of that data collapsed into a huge page (process_madvise
// MADV_COLLAPSE), pasta takes one fault per 2 MiB. Nothing pasta sees
// changes: the pages are as zero as before. Each network's pasta then
// holds all of its static memory (about 65 MiB) from its start, where on
// small pages it held what it had written (about 30 MiB).

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
// its zero-filled data backed by huge pages and lets it run. Where the
// kernel refuses (ptrace, MADV_COLLAPSE, CAP_SYS_NICE), the command runs
// on small pages, and h stops trying for later commands. newCmd is
// called again when the first command did not start; the error is the
// start's.
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
		h.hugeRefused("MADV_COLLAPSE", err)
	}
	_ = unix.PtraceDetach(pid) // fails only when it was killed since
	return cmd, nil
}

// hugeRefused turns huge pages off for h's later commands where err says
// the kernel will not give them (and not for a lack of memory now).
func (h *Host) hugeRefused(what string, err error) {
	if errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EBUSY) {
		return
	}
	if !h.noHuge.Swap(true) {
		h.log.Info("sandbox: pasta starts on small pages", "refused", what, "err", err)
	}
}

// remoteIovec is an iovec of another process's address space.
type remoteIovec struct{ base, len uintptr }

// hugeData collapses each whole 2 MiB of the anonymous writable mappings
// of process pid, stopped at its exec (so those mappings are its
// zero-filled data), into huge pages.
func hugeData(pid int) error {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return err
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", pid), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return err
	}
	defer unix.Close(pidfd)
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
		lo = (lo + hugePage - 1) &^ (hugePage - 1)
		hi &^= hugePage - 1
		if lo >= hi {
			continue
		}
		// The kernel collapses only where a page table is: one byte
		// written in each 2 MiB makes it. The byte is zero, as all of the
		// mapping is at exec.
		for a := lo; a < hi; a += hugePage {
			if _, err := mem.WriteAt([]byte{0}, int64(a)); err != nil {
				return err
			}
		}
		iov := remoteIovec{base: lo, len: hi - lo}
		_, _, e := unix.Syscall6(unix.SYS_PROCESS_MADVISE, uintptr(pidfd), uintptr(unsafe.Pointer(&iov)), 1, unix.MADV_COLLAPSE, 0, 0)
		if e != 0 {
			return e
		}
	}
	return s.Err()
}
