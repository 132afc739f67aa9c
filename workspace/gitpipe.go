package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// maxPipeStderr bounds the standard error a piped git command keeps.
const maxPipeStderr = 4 << 10

// exitError is a piped git command that ended with a non-zero status.
type exitError struct {
	code   int
	stderr string
}

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d: %s", e.code, e.stderr) }

// pipe runs `git <args>` with feed writing its standard input (closed
// when feed returns; none when feed is nil) and read reading its standard
// output (discarded when read is nil), each on its own goroutine. It
// returns ErrGit wrapping the first failure: feed's, read's, or the
// command's (an *exitError for a non-zero status). ctx's end, or
// GitTimeout, kills the command's process group.
func (g Git) pipe(ctx context.Context, feed func(io.Writer) error, read func(io.Reader) error, args ...string) error {
	if err := g.exec(ctx, feed, read, args...); err != nil {
		return fmt.Errorf("%w: git %s: %w", ErrGit, args[0], err)
	}
	return nil
}

// exec is pipe's work; its error is the failure itself, unwrapped.
func (g Git) exec(ctx context.Context, feed func(io.Writer) error, read func(io.Reader) error, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, GitTimeout)
	defer cancel()
	argv := append(g.argv(), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = g.Home, g.Env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	stderr := &tailBuffer{max: maxPipeStderr}
	cmd.Stderr = stderr
	var stdin io.WriteCloser
	var stdout io.ReadCloser
	var err error
	if feed != nil {
		if stdin, err = cmd.StdinPipe(); err != nil {
			return err
		}
	}
	if stdout, err = cmd.StdoutPipe(); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	errs := make(chan error, 2)
	go func() {
		if feed == nil {
			errs <- nil
			return
		}
		err := feed(stdin)
		if cerr := stdin.Close(); err == nil && cerr != nil && !errors.Is(cerr, io.ErrClosedPipe) {
			err = cerr
		}
		if err != nil {
			cancel() // the command must not take a half-written input for a whole one
		}
		errs <- err
	}()
	go func() {
		var err error
		if read != nil {
			err = read(stdout)
		}
		if err != nil {
			cancel() // before draining: a command past its bound stops now
		}
		_, _ = io.Copy(io.Discard, stdout)
		errs <- err
	}()
	ferr, rerr := <-errs, <-errs
	werr := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case ferr != nil && !errors.Is(ferr, syscall.EPIPE):
		err = ferr
	case rerr != nil:
		err = rerr
	case ctx.Err() != nil:
		err = fmt.Errorf("stopped: %w", ctx.Err())
	case errors.As(werr, &exit):
		err = &exitError{code: exit.ExitCode(), stderr: stderr.String()}
	case werr != nil:
		err = werr
	case ferr != nil:
		err = ferr
	}
	return err
}

// tailBuffer keeps the last max bytes written to it, as one line.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	return strings.Join(strings.Fields(string(bytes.ToValidUTF8(t.b, nil))), " ")
}

// ErrOutputLimit is a git command whose standard output passed the bound
// Output was given; it was killed.
var ErrOutputLimit = errors.New("git printed more than its bound")

// Output runs `git <args>` and returns its standard output, at most max
// bytes: past them the command is killed and the error wraps
// ErrOutputLimit.
func (g Git) Output(ctx context.Context, max int64, args ...string) ([]byte, error) {
	return g.output(ctx, nil, max, args...)
}

// OutputOf runs `git <args>` with input as its standard input and returns
// its standard output, as Output does.
func (g Git) OutputOf(ctx context.Context, input string, max int64, args ...string) ([]byte, error) {
	feed := func(w io.Writer) error {
		_, err := io.WriteString(w, input)
		return err
	}
	return g.output(ctx, feed, max, args...)
}

func (g Git) output(ctx context.Context, feed func(io.Writer) error, max int64, args ...string) ([]byte, error) {
	var out bytes.Buffer
	read := func(r io.Reader) error {
		n, err := io.Copy(&out, io.LimitReader(r, max+1))
		if err == nil && n > max {
			return ErrOutputLimit
		}
		return err
	}
	if err := g.pipe(ctx, feed, read, args...); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
