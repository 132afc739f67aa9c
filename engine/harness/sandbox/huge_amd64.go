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
// that instruction and its registers back. The kernel's refusal is its
// errno. A signal that stops the process first is sig, with
// errInterrupted (nothing was called). errTraceeLost: the process ended
// (and was reaped here), or its state could not be put back.
func remoteMadvise(pid int, addr, length uintptr, advice int) (sig int, err error) {
	var saved unix.PtraceRegs
	if err := unix.PtraceGetRegs(pid, &saved); err != nil {
		return 0, err
	}
	at := uintptr(saved.Rip)
	orig := make([]byte, len(syscallInsn))
	if _, err := unix.PtracePeekText(pid, at, orig); err != nil {
		return 0, err
	}
	if _, err := unix.PtracePokeText(pid, at, syscallInsn); err != nil {
		return 0, err
	}
	lost := false
	defer func() {
		if lost {
			return
		}
		back := make([]byte, len(orig))
		_, perr := unix.PtracePokeText(pid, at, orig)
		if perr == nil {
			_, perr = unix.PtracePeekText(pid, at, back)
		}
		if perr == nil && !bytes.Equal(back, orig) {
			perr = errors.New("the instruction read back differs")
		}
		if rerr := unix.PtraceSetRegs(pid, &saved); perr != nil || rerr != nil {
			err = fmt.Errorf("%w: putting back its state: %w", errTraceeLost, errors.Join(perr, rerr))
		}
	}()
	regs := saved
	regs.Rax = unix.SYS_MADVISE
	regs.Orig_rax = ^uint64(0) // not in a system call: nothing to restart
	regs.Rdi, regs.Rsi, regs.Rdx = uint64(addr), uint64(length), uint64(advice)
	if err := unix.PtraceSetRegs(pid, &regs); err != nil {
		return 0, err
	}
	if err := unix.PtraceSingleStep(pid); err != nil {
		return 0, err
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		lost = true
		return 0, fmt.Errorf("%w: %v %v", errTraceeLost, ws, err)
	}
	if err := unix.PtraceGetRegs(pid, &regs); err != nil {
		return 0, err
	}
	if regs.Rip != uint64(at)+uint64(len(syscallInsn)) {
		// A signal's stop before the instruction ran.
		return int(ws.StopSignal()), errInterrupted
	}
	if ret := int64(regs.Rax); ret < 0 {
		return 0, unix.Errno(-ret)
	}
	return 0, nil
}
