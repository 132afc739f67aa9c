package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// stallingHarness writes a harness whose codex agent says "waiting on the
// fifo" (a log record) and then blocks reading a fifo until release is
// called: while it waits, the run sends no event at all.
func stallingHarness(t *testing.T) (file string, release func()) {
	t.Helper()
	// World-readable, so that the agent reads them in its sandbox under
	// any UID.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "stall.sh")
	fifo := script + ".fifo"
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no fifo: %v", err)
	}
	body := "read -r _ || true\necho 'waiting on the fifo' >&2\nread -r _ < \"$0.fifo\"\necho '{\"session\":\"s\",\"text\":\"null\"}'\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "harness.json")
	cfg := fmt.Sprintf(`{"codex":{"driver":"command","argv":["/bin/sh",%q]}}`, script)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	release = func() {
		// Non-blocking: with no agent reading, there is nothing to release.
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return
		}
		_, _ = f.WriteString("go\n")
		_ = f.Close()
	}
	t.Cleanup(release)
	return file, release
}

// TestCLIRunInterruptLeavesRunGoing: Ctrl-C on run watch, run submit
// --watch and run logs --follow ends them with exit 130 while the run sends
// nothing (its agent blocks), says how to follow the run again or force
// it, and leaves the run running.
func TestCLIRunInterruptLeavesRunGoing(t *testing.T) {
	harness, release := stallingHarness(t)
	srv := startServer(t, "--harness", harness)
	submit := []string{"run", "submit", "-f", stepGraph, "--runtime", stepRuntime, "--source", testSource, "--id", "stall-1"}
	expect(t, oecp(t, srv, submit...), 0, []string{"submitted: run stall-1\n"}, nil)
	for _, c := range []struct {
		args        []string
		ready, hint string
	}{
		{[]string{"run", "watch", "stall-1"}, "work started", "`oecp run watch stall-1` follows it again"},
		{append(submit, "--watch"), "work started", "`oecp run watch stall-1` follows it again"},
		{[]string{"run", "logs", "stall-1", "--follow"}, "waiting on the fifo", "`oecp run logs stall-1 --follow` follows it again"},
	} {
		p := startCLI(t, srv, c.args...)
		p.waitStdout(c.ready)
		code := p.interrupt()
		seen := strings.Join(p.seen, "\n")
		if code != 130 || !strings.Contains(seen, c.hint) || !strings.Contains(seen, "`oecp run force stall-1` stops it") {
			t.Errorf("%v after Ctrl-C: exit %d, output %q; want 130 and %q", c.args, code, seen, c.hint)
		}
	}
	expect(t, oecp(t, srv, "run", "status", "stall-1"), 0, []string{"phase:    running", "active:   work (execution stall-1/work/1)"}, nil)
	release()
	expect(t, oecp(t, srv, "run", "watch", "stall-1"), 0, []string{"run stall-1 succeeded"}, nil)
}
