package worker

import (
	"os"
	"syscall"
	"testing"
)

// fGetPipeSize is Linux's F_GETPIPE_SZ fcntl command.
const fGetPipeSize = 1032

// The standard output pipe gets the larger buffer.
func TestGrowPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	growPipe(w)
	c, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var size uintptr
	_ = c.Control(func(fd uintptr) { size, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fGetPipeSize, 0) })
	if size < stdoutPipeBytes {
		t.Fatalf("pipe buffer %d bytes, want %d", size, stdoutPipeBytes)
	}
}
