package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// pastaMemory reads what the kernel says of pasta process pid's memory:
// its anonymous memory on huge pages, its minor faults since its start,
// and its tracer's PID.
func pastaMemory(t *testing.T, pid int) (hugeKiB, faults, tracer int) {
	t.Helper()
	rollup, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	field := func(text, name string) int {
		for line := range strings.Lines(text) {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				if err != nil {
					t.Fatalf("%s: %q", name, line)
				}
				return n
			}
		}
		t.Fatalf("no %s in %q", name, text)
		return 0
	}
	// minflt is the 10th field; the 2nd (comm) is the only one in parentheses.
	after := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	faults, err = strconv.Atoi(after[7])
	if err != nil {
		t.Fatal(err)
	}
	return field(string(rollup), "AnonHugePages"), faults, field(string(status), "TracerPid")
}

// runPasta prepares run and returns its network's pasta PID.
func runPasta(t *testing.T, h *Host, run string) int {
	t.Helper()
	h.Prepare(run)
	h.awaitPrepared(run)
	t.Cleanup(func() { h.CloseRun(run) })
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.nets[run]) != 1 {
		t.Fatalf("run %s has networks %v", run, h.nets[run])
	}
	return h.nets[run][0].net.cmd.Process.Pid
}

// A root server's pasta starts with its zero-filled data on huge pages:
// a few hundred faults where small pages take thousands, and it is not
// left traced.
func TestPastaStartsOnHugePages(t *testing.T) {
	h := requireHost(t, Config{NetworksAhead: -1})
	if !h.root {
		t.Skip("pasta is made huge by a root server (CAP_SYS_NICE) for runs' own network namespaces")
	}
	if thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || strings.Contains(string(thp), "[never]") {
		t.Skipf("transparent huge pages are off here (%q, %v)", thp, err)
	}
	huge, faults, tracer := pastaMemory(t, runPasta(t, h, "huge"))
	t.Logf("pasta: %d KiB on huge pages, %d faults", huge, faults)
	if h.noHuge.Load() || huge < 32<<10 || faults > 2000 || tracer != 0 {
		t.Fatalf("pasta on huge pages: refused %v, %d KiB huge, %d faults, tracer %d", h.noHuge.Load(), huge, faults, tracer)
	}
}

// Where huge pages were refused, pasta starts as before, on small pages,
// untraced.
func TestPastaOnSmallPagesOnceRefused(t *testing.T) {
	h := requireHost(t, Config{NetworksAhead: -1})
	if !h.root {
		t.Skip("runs get network namespaces of their own only on a root server")
	}
	if thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || !strings.Contains(string(thp), "[madvise]") {
		t.Skipf("only with transparent huge pages on madvise are pasta's pages small unless it asks (%q, %v)", thp, err)
	}
	h.noHuge.Store(true)
	huge, faults, tracer := pastaMemory(t, runPasta(t, h, "small"))
	t.Logf("pasta: %d KiB on huge pages, %d faults", huge, faults)
	if huge != 0 || faults < 2000 || tracer != 0 {
		t.Fatalf("pasta on small pages: %d KiB huge, %d faults, tracer %d", huge, faults, tracer)
	}
}

// pasta is run as the AVX2 build beside it where the CPU has AVX2 (what
// passt itself would exec), and as itself otherwise.
func TestPastaProgram(t *testing.T) {
	dir := t.TempDir()
	passt := filepath.Join(dir, "passt")
	pasta := filepath.Join(dir, "pasta")
	for _, f := range []string{passt, passt + ".avx2"} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("passt", pasta); err != nil {
		t.Fatal(err)
	}
	want := pasta
	if cpu.X86.HasAVX2 {
		want = passt + ".avx2"
	}
	if got := pastaProgram(pasta); got != want {
		t.Errorf("pastaProgram(%s) = %s, want %s", pasta, got, want)
	}
	if err := os.Remove(passt + ".avx2"); err != nil {
		t.Fatal(err)
	}
	if got := pastaProgram(pasta); got != pasta {
		t.Errorf("without an AVX2 build: pastaProgram = %s, want %s", got, pasta)
	}
	if err := os.WriteFile(passt+".avx2", []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := pastaProgram(pasta); got != pasta {
		t.Errorf("with an AVX2 build that is not executable: pastaProgram = %s, want %s", got, pasta)
	}
}
