package sandbox

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// gateAt writes the embedded oecp-gate to a file of its own and returns
// its path.
func gateAt(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), gateArg0)
	if err := os.WriteFile(p, gateProgram, 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// runGate runs oecp-gate with input on descriptor 3 and returns its exit
// status, standard output and standard error.
func runGate(t *testing.T, gate, input string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runGateWith(t, exec.Command(gate, args...), 0, input)
}

// runGateWith runs cmd, oecp-gate, with input on descriptor 3+at (after
// cmd's own ExtraFiles up to at) and returns its exit status, standard
// output and standard error.
func runGateWith(t *testing.T, cmd *exec.Cmd, at int, input string) (code int, stdout, stderr string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	extra := cmd.ExtraFiles
	cmd.ExtraFiles = append(append(slices.Clone(extra[:at]), r), extra[at:]...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	_, _ = w.WriteString(input)
	w.Close()
	err = cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// Confine writes the gate into a pipe before bwrap runs to read it: the
// gate must fit the pipe's buffer, a page at least.
func TestGateProgramFitsAPipePage(t *testing.T) {
	if len(gateProgram) == 0 || len(gateProgram) > 4096 {
		t.Fatalf("oecp-gate is %d bytes, want 1 to 4096", len(gateProgram))
	}
}

// The embedded gate is what its source builds to, with the compiler and
// linker that built it (others may lay the same program out otherwise).
func TestGateProgramIsItsSource(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("gate", "built-with"))
	if err != nil {
		t.Fatal(err)
	}
	var tools []string
	for _, tool := range []string{"gcc", "ld"} {
		version, err := exec.Command(tool, "--version").Output()
		if err != nil {
			t.Skipf("no %s to build oecp-gate with", tool)
		}
		first, _, _ := strings.Cut(string(version), "\n")
		tools = append(tools, first)
	}
	if got := strings.Join(tools, "\n"); got != strings.TrimSpace(string(want)) {
		t.Skipf("oecp-gate was built with %q, not this machine's %q", strings.TrimSpace(string(want)), got)
	}
	out := filepath.Join(t.TempDir(), "gate")
	if b, err := exec.Command("sh", filepath.Join("gate", "build.sh"), out).CombinedOutput(); err != nil {
		t.Fatalf("gate/build.sh: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, gateProgram) {
		t.Fatal("gate/oecp-gate-amd64 is not the build of gate/gate.c: run gate/build.sh")
	}
}

// The gate runs the program only after "go" and a newline, and closes its
// descriptor first; anything else (end of file above all: a server that
// died) ends it with 125 having run nothing.
func TestGateOpensOnGoAlone(t *testing.T) {
	gate := gateAt(t)
	code, out, errOut := runGate(t, gate, "go\n", "3", "-", "/bin/sh", "-c", `test -e /proc/self/fd/3 && echo open; echo ran "$0"`, "arg")
	if code != 0 || out != "ran arg\n" || errOut != "" {
		t.Fatalf(`"go": exit %d, output %q, errors %q; want 0, "ran arg", none`, code, out, errOut)
	}
	for _, input := range []string{"", "go", "no\n", "gogo\n", "g\n", "\n", "go \n"} {
		code, out, _ := runGate(t, gate, input, "3", "-", "/bin/echo", "ran")
		if code != 125 || out != "" {
			t.Errorf("input %q: exit %d, output %q; want 125 and nothing run", input, code, out)
		}
	}
}

// A program the gate cannot execute is named, with a shell's statuses:
// 127 not found, 126 not executable.
func TestGateNamesAProgramItCannotExecute(t *testing.T) {
	gate := gateAt(t)
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		program, why string
		code         int
	}{{"/nonexistent/agent", "No such file or directory", 127}, {plain, "Permission denied", 126}} {
		code, _, errOut := runGate(t, gate, "go\n", "3", "-", c.program)
		if want := "oecp-gate: cannot execute " + c.program + ": " + c.why + "\n"; code != c.code || errOut != want {
			t.Errorf("%s: exit %d, errors %q; want %d and %q", c.program, code, errOut, c.code, want)
		}
	}
	if code, _, errOut := runGate(t, gate, "go\n", "3", "x", "/bin/true"); code != 125 || !strings.Contains(errOut, "not a user ID") {
		t.Errorf("a bad UID: exit %d, errors %q", code, errOut)
	}
}

// As root the gate leaves the program the UID as its every user and group
// ID, no other group, no capability in any set, and no_new_privs.
func TestGateTakesTheAgentsIdentity(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("OECP_REQUIRE_SANDBOX") == "1" {
			t.Fatal("OECP_REQUIRE_SANDBOX=1, but not root: the gate's identity needs root")
		}
		t.Skip("taking an identity needs root")
	}
	const uid = 2099999917
	for _, bad := range []string{"0", "4294967295"} {
		if code, out, _ := runGate(t, gateAt(t), "go\n", "3", bad, "/bin/echo", "ran"); code != 125 || out != "" {
			t.Errorf("UID %s: exit %d, output %q; want 125 and nothing run", bad, code, out)
		}
	}
	// The gate starts with supplementary groups and inheritable and
	// ambient capabilities, so that dropping each shows.
	cmd := exec.Command(gateAt(t), "3", strconv.Itoa(uid), "/bin/cat", "/proc/self/status")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential:  &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{4, 27}},
		AmbientCaps: []uintptr{1, 21}, // CAP_DAC_OVERRIDE, CAP_SYS_ADMIN
	}
	code, out, errOut := runGateWith(t, cmd, 0, "go\n")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	checkIdentity(t, out, uid)
}

// The gate closes its descriptor and every one above it (a descriptor the
// server inherited without close-on-exec would otherwise reach the
// agent), and leaves the program's own, below it.
func TestGateClosesEveryDescriptorFromItsOwn(t *testing.T) {
	own, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	leaked, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer leaked.Close()
	// The program's file at 3, the gate's at 4, the leaked one at 5.
	cmd := exec.Command(gateAt(t), "4", "-", "/bin/sh", "-c", `for fd in 3 4 5; do test -e /proc/self/fd/$fd && echo open $fd; done; true`)
	cmd.ExtraFiles = []*os.File{own, leaked}
	code, out, errOut := runGateWith(t, cmd, 1, "go\n")
	if code != 0 || out != "open 3\n" {
		t.Fatalf("exit %d, output %q (errors %q); want 0 and descriptor 3 alone open", code, out, errOut)
	}
	if code, _, _ := runGateWith(t, exec.Command(gateAt(t), "2", "-", "/bin/true"), 0, "go\n"); code != 125 {
		t.Errorf("descriptor 2 as the gate's: exit %d, want 125", code)
	}
}

// A script without "#!" runs under /bin/sh, as execvp would run it.
func TestGateRunsAScriptWithoutInterpreterLine(t *testing.T) {
	script := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(script, []byte(`echo ran "$1"`+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runGate(t, gateAt(t), "go\n", "3", "-", script, "arg"); code != 0 || out != "ran arg\n" {
		t.Fatalf("exit %d, output %q, errors %q", code, out, errOut)
	}
}
