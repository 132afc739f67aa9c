package sandbox

import (
	"bytes"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// syscallInsn is x86-64's syscall instruction.
var syscallInsn = []byte{0x0f, 0x05}

// remoteMadvise has process pid, a tracee of this thread in a stop, call
// madvise(addr, length, advice) at its current instruction, then puts
// that instruction and its registers back. Where they cannot be put back
// (the process died meanwhile), the process is killed.
func remoteMadvise(pid int, addr, length uintptr, advice int) (err error) {
	var saved unix.PtraceRegs
	if err := unix.PtraceGetRegs(pid, &saved); err != nil {
		return err
	}
	at := uintptr(saved.Rip)
	orig := make([]byte, len(syscallInsn))
	if _, err := unix.PtracePeekText(pid, at, orig); err != nil {
		return err
	}
	if _, err := unix.PtracePokeText(pid, at, syscallInsn); err != nil {
		return err
	}
	defer func() {
		back := make([]byte, len(orig))
		_, perr := unix.PtracePokeText(pid, at, orig)
		if perr == nil {
			_, perr = unix.PtracePeekText(pid, at, back)
		}
		if perr == nil && !bytes.Equal(back, orig) {
			perr = errors.New("the instruction read back differs")
		}
		if rerr := unix.PtraceSetRegs(pid, &saved); perr != nil || rerr != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			err = errors.Join(err, fmt.Errorf("putting back the process's state: %w", errors.Join(perr, rerr)))
		}
	}()
	regs := saved
	regs.Rax = unix.SYS_MADVISE
	regs.Orig_rax = ^uint64(0) // not in a system call: nothing to restart
	regs.Rdi, regs.Rsi, regs.Rdx = uint64(addr), uint64(length), uint64(advice)
	if err := unix.PtraceSetRegs(pid, &regs); err != nil {
		return err
	}
	if err := unix.PtraceSingleStep(pid); err != nil {
		return err
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
		return err
	}
	if !ws.Stopped() {
		return fmt.Errorf("the process ended during madvise: %v", ws)
	}
	if err := unix.PtraceGetRegs(pid, &regs); err != nil {
		return err
	}
	if regs.Rip != uint64(at)+uint64(len(syscallInsn)) {
		return fmt.Errorf("the process stopped at %#x, not after the system call", regs.Rip)
	}
	if ret := int64(regs.Rax); ret < 0 {
		return unix.Errno(-ret)
	}
	return nil
}
