package testkit

import (
	"io"
	"os/exec"
	"testing"
)

// StartStderr starts cmd and returns the read end of its stderr, which
// the caller reads to its end; the test fails if cmd cannot start.
func StartStderr(t testing.TB, cmd *exec.Cmd) io.ReadCloser {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return stderr
}
