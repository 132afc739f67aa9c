package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/engine/harness/sandbox/sandboxtest"
)

// TestServeRefusesAMissingHarnessProgram: a harness entry whose program is
// not on the server's PATH, and one whose program path does not exist,
// make `oecp serve` refuse to start (exit 2), naming each entry, its
// program and why.
func TestServeRefusesAMissingHarnessProgram(t *testing.T) {
	file := writeHarness(t, `{"claude":{"argv":["oecp-no-such-cli"]},"codex":{"driver":"command","argv":["/nonexistent/codex-agent"]}}`)
	args := append([]string{"--store", "memory", "--harness", file}, sandboxtest.ServeFlags(t)...)
	code, stderr := serveRefused(t, args...)
	for _, want := range []string{`harness claude: program "oecp-no-such-cli" is not on the server's PATH`,
		`harness codex: program "/nonexistent/codex-agent" does not exist`} {
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, want 2 and %q:\n%s", code, want, stderr)
		}
	}
}

// TestServeRefusesAHarnessProgramThatCannotRunInTheSandbox: a harness
// program the server itself can run but an agent cannot, because its
// interpreter lies in the server's data directory (hidden from agents),
// makes `oecp serve` refuse to start, naming the program and the
// sandbox's words; unconfined, the same file starts.
func TestServeRefusesAHarnessProgramThatCannotRunInTheSandbox(t *testing.T) {
	sandboxtest.Require(t, sandbox.Config{})
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	interp := filepath.Join(data, "interp", "sh")
	if err := os.MkdirAll(filepath.Dir(interp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(interp, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	// In a directory of its own, which the sandbox shows.
	agent := filepath.Join(dir, "agent", "codex")
	if err := os.Mkdir(filepath.Dir(agent), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(agent, []byte("#!"+interp+"\necho codex-cli 0.0.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(agent, "--version").CombinedOutput(); err != nil {
		t.Fatalf("the server cannot run %s itself: %v\n%s", agent, err, out)
	}
	file := writeHarness(t, `{"codex":{"argv":["`+agent+`"]}}`)
	code, stderr := serveRefused(t, "--data", data, "--harness", file)
	if want := `harness codex: program "` + agent + `" cannot execute where agents run (exit `; code != 2 || !strings.Contains(stderr, want) ||
		!strings.Contains(stderr, "No such file or directory") {
		t.Fatalf("exit %d, want 2 and %q:\n%s", code, want, stderr)
	}
	startServer(t, "--harness", file, "--agent-unconfined").waitLog(t, "harness programs checked")
}
