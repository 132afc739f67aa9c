package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
)

// A program whose installation cannot be shown is shown from the
// outermost directory between them that can be; one directly in a
// private directory as the file alone; one directly in the hidden home,
// in the data directory, or missing, not at all.
func TestExposedPathsFallBackToWhatMayBeShown(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(home, "data")
	binProg := filepath.Join(home, "bin", "agent") // installation: home
	homeProg := filepath.Join(home, "agent.sh")
	dataProg := filepath.Join(data, "agent.sh")
	for _, p := range []string{binProg, homeProg, dataProg} {
		testkit.WriteFile(t, p, 1)
	}
	dirs, _, explicit := hiddenPaths([]string{home, data})
	got := exposedPaths(dirs, explicit, []string{binProg, homeProg, dataProg, filepath.Join(home, "bin", "missing")})
	if want := []string{filepath.Join(home, "bin")}; !slices.Equal(got, want) {
		t.Fatalf("exposed %v, want %v", got, want)
	}
	f, err := os.CreateTemp("/tmp", "oecp-exposed-test-*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer os.Remove(f.Name())
	if got := exposedPaths(dirs, explicit, []string{f.Name()}); !slices.Equal(got, []string{f.Name()}) {
		t.Fatalf("a program directly in /tmp: exposed %v", got)
	}
}

// tmpProgram writes an executable script directly in /tmp (a private
// directory of every sandbox) that prints its name.
func tmpProgram(t *testing.T) string {
	t.Helper()
	f, err := os.CreateTemp("/tmp", "oecp-sandbox-program-*.sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	if _, err := f.WriteString("#!/bin/sh\necho ran\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chmod(f.Name(), 0o755); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// TestProgramDirectlyInTmpRunsInTheSandbox: a harness program installed
// directly in /tmp, which each sandbox gets empty, runs there (it used to
// exit 127, not found).
func TestProgramDirectlyInTmpRunsInTheSandbox(t *testing.T) {
	prog := tmpProgram(t)
	h := requireHost(t, Config{Programs: []string{prog}, Commands: []string{prog}})
	res := runConfined(t, h, prog)
	if res.StartErr != nil || res.Exit != nil || strings.TrimSpace(string(res.Stdout)) != "ran" {
		t.Fatalf("start %v, exit %v, stdout %q", res.StartErr, res.Exit, res.Stdout)
	}
}

// TestProgramMissingInsideTheSandboxIsNamed: a program the sandbox does
// not show (not a harness program, so not exposed) does not start, and
// the error names it and says why, instead of an exit status 127.
func TestProgramMissingInsideTheSandboxIsNamed(t *testing.T) {
	prog := tmpProgram(t)
	h := requireHost(t, Config{})
	res := runConfined(t, h, prog)
	if !errors.Is(res.StartErr, ErrNotFound) {
		t.Fatalf("start %v, exit %v", res.StartErr, res.Exit)
	}
	want := "program not found inside the agent sandbox: " + prog + " (" + prog + " is inside /tmp, which each sandbox gets empty)"
	if res.StartErr.Error() != want {
		t.Fatalf("%q\nwant %q", res.StartErr, want)
	}
}

// runConfined runs prog in an execution of run "r" on h, which it
// closes with the run.
func runConfined(t *testing.T, h *Host, prog string) worker.ProcessResult {
	t.Helper()
	defer h.CloseRun("r")
	ws := t.TempDir()
	e, err := h.Start(Spec{Run: "r", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return worker.Process{Argv: []string{prog}, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"}, MaxStdout: 1 << 16, Confine: e.Confine}.Run(context.Background())
}

// TestNewRefusesAHarnessProgramItCannotShow: a harness program directly in
// the server's hidden home, or inside its data directory, is refused when
// the sandbox is made, naming the program and why.
func TestNewRefusesAHarnessProgramItCannotShow(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(home, "data")
	for prog, in := range map[string]string{filepath.Join(home, "agent.sh"): home, filepath.Join(data, "agent.sh"): data} {
		testkit.WriteFile(t, prog, 1)
		_, err := New(Config{Hide: []string{home, data}, Programs: []string{prog}, Commands: []string{prog}})
		if errors.Is(err, ErrUnavailable) {
			t.Skipf("needs the agent sandbox: %v", err)
		}
		if !errors.Is(err, ErrHiddenProgram) || !strings.HasPrefix(err.Error(), "harness program hidden from agents: "+prog+" is inside "+in+", which the sandbox hides") {
			t.Errorf("%s: %v", prog, err)
		}
	}
}
