package worker_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/oecp/oecp/engine/worker"
)

// TestSlowLineHandlerNeverFillsThePipe: a program writes four times more
// than its output pipe holds and then signals on a FIFO; the line handler
// does not return from the first line until that signal. The program's
// writes must complete meanwhile (the pipe is read ahead of the handler),
// or the two would wait on each other forever; every line still arrives,
// in order.
func TestSlowLineHandlerNeverFillsThePipe(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "written")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	const lines = 4 << 10 // of 1 KiB each: 4 MiB against a 1 MiB pipe
	script := `line=$(printf '%01023d' 0); i=0; while [ $i -lt 4096 ]; do echo "$line"; i=$((i+1)); done; echo done > "$0"`
	n := 0
	res := worker.Process{
		Argv:      []string{"/bin/sh", "-c", script, fifo},
		MaxStdout: 64 << 20,
		Lines: func(line []byte) {
			if n == 0 {
				f, err := os.Open(fifo) // blocks until the program opens it to write
				if err != nil {
					t.Error(err)
					return
				}
				buf := make([]byte, 8)
				_, _ = f.Read(buf)
				f.Close()
			}
			if len(bytes.TrimSuffix(line, []byte("\n"))) != 1023 {
				t.Errorf("line %d has %d bytes", n, len(line))
			}
			n++
		},
	}.Run(context.Background())
	if res.StartErr != nil || res.Exit != nil || res.Overflow {
		t.Fatalf("run: %+v", res)
	}
	if n != lines {
		t.Fatalf("%d lines, want %d", n, lines)
	}
}
