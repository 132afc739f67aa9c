package harness

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/engine/worker"
)

// Bounds of the start check.
const (
	// StartCheckTimeout bounds one harness program's --version run when
	// the server starts; the programs run at the same time, so it bounds
	// the whole check too. A program that could not execute fails at
	// once, so one still running then has started: it is stopped and
	// passes, with a WARN.
	StartCheckTimeout = 10 * time.Second
	// startCheckOutput bounds the output of that run kept for the error.
	startCheckOutput = 64 << 10
)

// Exit statuses of a shell, env, setpriv or the sandbox's start gate that
// could not run a program:
// found but not executable, and not found (a missing interpreter too).
const (
	exitCannotExecute = 126
	exitNotFound      = 127
)

// ErrProgram wraps a harness entry whose program cannot run where agents
// run.
var ErrProgram = errors.New("harness program cannot run")

// CheckPrograms runs each entry's program (argv[0] alone) with --version
// where its agents would run: confined by h (nil: directly), under an
// agent's environment, in a scratch workspace and home of its own under
// dir ("" the system's temporary directory). The entries run at the same
// time, each bounded by StartCheckTimeout. An entry fails when its program
// is not found (on the server's PATH, or at its path), the sandbox does
// not show it, or it cannot execute there (not executable, a missing
// interpreter or loader: the exec failure of the sandbox, or exit 126 or
// 127). A codex or claude CLI whose --version exits non-zero, or any
// program still running at StartCheckTimeout, passes with a WARN: it
// ran. The error wraps ErrProgram and names every failing entry, its
// program and why, in name order.
func (c *Config) CheckPrograms(ctx context.Context, h *sandbox.Host, dir string, log *slog.Logger) error {
	names := c.Names()
	whys := make([]string, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			why, warn := c.checkProgram(ctx, h, dir, name)
			if why != "" {
				whys[i] = fmt.Sprintf("harness %s: program %q %s", name, c.entries[name].Argv[0], why)
			}
			if warn != "" {
				log.Warn("harness program check: "+warn, "harness", name, "program", c.entries[name].Argv[0])
			}
		})
	}
	wg.Wait()
	var failed []string
	for _, w := range whys {
		if w != "" {
			failed = append(failed, w)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w where agents run: %s", ErrProgram, strings.Join(failed, "; "))
	}
	return nil
}

// checkProgram is CheckPrograms for one entry: why it cannot run ("" when
// it can), and what a program that can run did amiss ("" nothing).
func (c *Config) checkProgram(ctx context.Context, h *sandbox.Host, dir, name string) (why, warn string) {
	e := c.entries[name]
	prog := e.Argv[0]
	path, err := exec.LookPath(prog)
	switch {
	case err != nil && !strings.ContainsRune(prog, '/'):
		return fmt.Sprintf("is not on the server's PATH (%s)", serverPath()), ""
	case errors.Is(err, fs.ErrNotExist):
		return "does not exist", ""
	case errors.Is(err, fs.ErrPermission):
		return "is not executable by the server", ""
	case err != nil:
		return fmt.Sprintf("cannot be run: %v", err), ""
	}
	scratch, err := os.MkdirTemp(dir, "oecp-harness-check-")
	if err != nil {
		return fmt.Sprintf("could not be checked: %v", err), ""
	}
	defer os.RemoveAll(scratch)
	work, home := filepath.Join(scratch, "work"), filepath.Join(scratch, "home")
	for _, d := range []string{work, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Sprintf("could not be checked: %v", err), ""
		}
	}
	run := "harness-check-" + name
	defer h.CloseRun(run)
	exe, err := h.Start(sandbox.Spec{Run: run, Workspace: work, Home: home})
	if err != nil {
		return fmt.Sprintf("could not be checked: the agent sandbox did not start: %v", err), ""
	}
	defer exe.Close()
	env := []string{}
	if e.Driver != DriverCommand {
		env = []string{"PATH=" + serverPath(), "HOME=" + home, "TMPDIR=" + home}
	}
	// Each stream is written by its own reader goroutine.
	var stdout, stderr boundedText
	cctx, cancel := context.WithTimeout(ctx, StartCheckTimeout)
	defer cancel()
	res := worker.Process{Argv: []string{path, "--version"}, Dir: work, Env: env, MaxStdout: startCheckOutput,
		Lines: func(l []byte) { stdout.add(string(l)) },
		Sinks: worker.Sinks{Log: func(_, m string) { stderr.add(m + "\n") }}, Confine: exe.Confine}.Run(cctx)
	last := lastLine(stderr.String())
	if last == "" {
		last = lastLine(stdout.String())
	}
	return verdict(ctx, e, res, last)
}

// boundedText keeps the first startCheckOutput bytes written to it.
type boundedText struct{ strings.Builder }

func (b *boundedText) add(s string) {
	if b.Len() < startCheckOutput {
		b.WriteString(s)
	}
}

// verdict says why a --version run shows the program cannot run where
// agents run ("" when it can), and what it did amiss if it can.
func verdict(ctx context.Context, e Entry, res worker.ProcessResult, last string) (why, warn string) {
	if last == "" {
		last = "(no output)"
	}
	var exit *exec.ExitError
	code := -1
	if errors.As(res.Exit, &exit) {
		code = exit.ExitCode()
	}
	cli := e.Driver != DriverCommand
	switch {
	case res.StartErr != nil:
		return fmt.Sprintf("cannot be started: %v", res.StartErr), ""
	case res.Cancelled && ctx.Err() != nil:
		return "was not checked: the server is stopping", ""
	case res.Cancelled:
		return "", fmt.Sprintf("it ran, but did not end within %s of --version; it was stopped", StartCheckTimeout)
	case code == exitCannotExecute || code == exitNotFound || execFailure(last):
		return fmt.Sprintf("cannot execute where agents run (exit %d): %s", code, last), ""
	case cli && res.Exit != nil:
		return "", fmt.Sprintf("it ran, but --version exited %d: %s", code, last)
	}
	return "", ""
}

// execFailure reports whether line is the sandbox's own report of a
// program it could not start: bubblewrap's exec failure, any line of its
// start gate oecp-gate (which writes only when the program does not
// start: it cannot execute it, or cannot take the agent's identity), or
// setpriv's exec failure under a leased UID where the gate is a shell.
func execFailure(line string) bool {
	return strings.HasPrefix(line, "bwrap: execvp ") || strings.HasPrefix(line, "oecp-gate: ") ||
		strings.HasPrefix(line, "setpriv: failed to execute ")
}

// lastLine is the last non-empty line of out.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
