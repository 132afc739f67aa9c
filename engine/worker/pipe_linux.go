package worker

import (
	"os"
	"syscall"
)

// stdoutPipeBytes is the kernel buffer asked for a program's standard
// output pipe (the default is 64 KiB). A Node CLI such as Claude Code
// writes its last event, which can be hundreds of KiB, and exits at once,
// dropping whatever the pipe did not take; a buffer this size takes it
// whole even when the reader is busy with the lines before it.
const stdoutPipeBytes = 1 << 20

// fSetPipeSize is Linux's F_SETPIPE_SZ fcntl command.
const fSetPipeSize = 1031

// growPipe asks for stdoutPipeBytes of buffer on the pipe behind w; the
// kernel may refuse (a lower pipe-max-size), which leaves the default.
func growPipe(w *os.File) {
	c, err := w.SyscallConn()
	if err != nil {
		return
	}
	_ = c.Control(func(fd uintptr) {
		_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSize, stdoutPipeBytes)
	})
}
