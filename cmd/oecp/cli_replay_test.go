package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestCLIReplayedAndLiveLines: a watch that attaches to a running run
// marks what it replays from the history with --:--:-- and stamps what
// arrives live with the time; a step that began before the watch and
// ends while it watches keeps a duration (a lower bound).
func TestCLIReplayedAndLiveLines(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no fifo: %v", err)
	}
	workers := filepath.Join(dir, "workers.json")
	spec := fmt.Sprintf(`[{"worker":"test.gate@1","kind":"step","input":{"kind":"null"},"output":{"kind":"null"},"argv":["/bin/sh","-c","cat >/dev/null; read -r _ < %s; echo null"],"env":["PATH"]}]`, fifo)
	graph := filepath.Join(dir, "gate.json")
	g, err := os.ReadFile(ticker)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(os.WriteFile(workers, []byte(spec), 0o600), os.WriteFile(graph, []byte(strings.Replace(string(g), "test.ticker@1", "test.gate@1", 1)), 0o600)); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--workers", workers)
	expect(t, oecp(t, srv, "apply", "-f", graph, "--input", "null"), 0, nil, nil)
	// A first watch sees the step start; a second one then attaches late.
	first := startCLI(t, srv, "watch")
	first.waitStdout("work started")
	first.interrupt()
	w := startCLI(t, srv, "watch")
	w.waitStdout("--:--:-- work started")
	// The gate opens: the step ends while the watch is live.
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("go\n")
	_ = f.Close()
	if code := w.wait(); code != 0 {
		t.Fatalf("watch exit %d: %q", code, w.seen)
	}
	live := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d work finished \(verified\) after more than \S+ \(it began before this watch\)`)
	if out := strings.Join(w.seen, "\n"); !live.MatchString(out) {
		t.Errorf("the live end of a step that began before the watch: %q", w.seen)
	}
}

// TestCLIRunLogsReplayedLines: run logs of a finished run prints its
// records as replayed (--:--:--), not at the time they were printed.
func TestCLIRunLogsReplayedLines(t *testing.T) {
	srv := exampleServer(t)
	submit := []string{"run", "submit", "-f", exampleGraph, "--runtime", exampleRuntime, "--input", exampleInput, "--source", testSource, "--id", "replay-1"}
	expect(t, oecp(t, srv, append(submit, "--watch")...), 0, nil, nil)
	r := oecp(t, srv, "run", "logs", "replay-1")
	expect(t, r, 0, []string{"--:--:-- info  draft/1: "}, nil)
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if !strings.HasPrefix(l, "--:--:-- ") {
			t.Errorf("a replayed log line is stamped: %q", l)
		}
	}
}

// TestCLIMapItemEndsNumbered: the ends of concurrent map items, which do
// not say which item ended, are numbered among the node's dispatches.
func TestCLIMapItemEndsNumbered(t *testing.T) {
	srv := startServer(t)
	r := oecp(t, srv, "apply", "-f", "../../examples/map-items.json", "--input", "@../../examples/map-items.input.json", "--watch", "--timestamps=false")
	expect(t, r, 0, []string{"echoItem[0] started\n"}, nil)
	for _, want := range []string{"(end 1 of 3) finished", "(end 2 of 3) finished", "(end 3 of 3) finished"} {
		if !strings.Contains(r.stdout, want) && !regexp.MustCompile(`echoItem\[\d\] finished`).MatchString(r.stdout) {
			t.Errorf("map item ends not numbered (%q):\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\necho finished") || regexp.MustCompile(`(?m)^echoItem finished`).MatchString(r.stdout) {
		t.Errorf("an unnumbered map item end:\n%s", r.stdout)
	}
}
