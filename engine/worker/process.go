package worker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oecp/oecp/protocol"
)

// PipeDrainGrace bounds how long a finished process's pipes are read after
// its process group was killed. Only a descendant that left the group
// (setsid) can keep a pipe open that long; its output is then cut off.
const PipeDrainGrace = 2 * time.Second

// Process is one run of an external program in its own process group.
type Process struct {
	Argv []string
	// Dir is the working directory ("" inherits the server's).
	Dir string
	// Env is the complete environment, as KEY=VALUE entries; nothing else
	// of the server's environment reaches the program.
	Env []string
	// Stdin is written to the program's standard input, then closed.
	Stdin []byte
	// MaxStdout bounds standard output; a program that writes more is
	// killed with its group at once and the result reports Overflow.
	MaxStdout int64
	// Sinks receive every standard-error line, sanitised and bounded.
	Sinks Sinks
	// Started, when set, is called with the process group id once the
	// program runs.
	Started func(pgid int)
	// Lines, when set, receives standard output as it arrives, one line
	// at a time with its newline (a last line without one is passed when
	// the output ends), and ProcessResult.Stdout stays empty; the slice is
	// only valid during the call. MaxStdout still bounds the total.
	Lines func(line []byte)
	// Confine, when set, may change the command before it starts (to run
	// it in a sandbox); its start, when not nil, is called instead of
	// cmd.Start, and its cleanup runs once the process group was killed
	// and its output read. An error is reported as StartErr.
	Confine func(cmd *exec.Cmd) (start func() error, cleanup func(), err error)
	// Tap, when set, receives the program's raw evidence (Tap).
	Tap Tap
}

// ProcessResult is how a Process ended. Exactly one of StartErr,
// Cancelled, Overflow or Exit describes the end.
type ProcessResult struct {
	Stdout []byte
	// StartErr: the program could not be started.
	StartErr error
	// Cancelled: ctx ended first; the group was killed.
	Cancelled bool
	// Overflow: standard output went past MaxStdout; the group was killed.
	Overflow bool
	// Exit is the program's exit error (nil: exit status 0).
	Exit error
}

// EnvFrom returns KEY=VALUE entries for the listed names that are set in
// the server's environment.
func EnvFrom(names []string) []string {
	env := []string{}
	for _, name := range names {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// Run starts the program and returns when it has ended. The program
// runs as the leader of a new process group; when the leader exits, the
// whole group is killed at once, so a background child that inherited
// its output cannot hold the execution open, and the output written
// until then is collected. Cancelling ctx or writing more than MaxStdout
// kills the group too.
func (p Process) Run(ctx context.Context) ProcessResult {
	outR, outW, err := os.Pipe()
	if err != nil {
		return ProcessResult{StartErr: err}
	}
	growPipe(outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return ProcessResult{StartErr: err}
	}
	cmd := exec.Command(p.Argv[0], p.Argv[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = p.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdin = bytes.NewReader(p.Stdin)
	cmd.Stdout, cmd.Stderr = outW, errW
	start := cmd.Start
	if p.Confine != nil {
		confined, cleanup, cerr := p.Confine(cmd)
		if cerr != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return ProcessResult{StartErr: cerr}
		}
		defer cleanup()
		if confined != nil {
			start = confined
		}
	}
	err = start()
	// The parent's write ends are closed at once: EOF on a pipe then
	// means every process of the group holding it is gone.
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return ProcessResult{StartErr: err}
	}
	pgid := cmd.Process.Pid
	if p.Started != nil {
		p.Started(pgid)
	}
	raw, rawDone := tapped(p.Tap, p.Argv, p.Stdin)
	kill := sync.OnceFunc(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })

	overflow := make(chan struct{})
	stdout := &limitedBuffer{limit: p.MaxStdout, onOver: sync.OnceFunc(func() { close(overflow); kill() })}
	if p.Lines != nil {
		stdout.lines = &lineSplitter{emit: p.Lines}
	}
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); copyOut(stdout, tap(outR, raw, "stdout"), p.Lines != nil, p.MaxStdout) }()
	go func() { defer pipes.Done(); pumpStderr(tap(errR, raw, "stderr"), p.Sinks) }()

	exited := make(chan error, 1)
	go func() { exited <- waitLeader(cmd) }()
	var res ProcessResult
	select {
	case res.Exit = <-exited:
	case <-overflow:
		res.Overflow = true
		res.Exit = <-exited
	case <-ctx.Done():
		res.Cancelled = true
		kill()
		res.Exit = <-exited
	}
	kill()
	drainPipes(&pipes, outR, errR)
	rawDone()
	if stdout.over {
		res.Overflow = true
	}
	if stdout.lines != nil {
		stdout.lines.flush()
	} else {
		res.Stdout = stdout.Bytes()
	}
	return res
}

// waitLeader waits for the group leader only; the pipes are read
// elsewhere, so a descendant holding them does not delay it.
func waitLeader(cmd *exec.Cmd) error {
	st, err := cmd.Process.Wait()
	if err != nil {
		return err
	}
	if !st.Success() {
		return &exec.ExitError{ProcessState: st}
	}
	return nil
}

// drainPipes waits for both pipe readers to reach EOF, at most
// PipeDrainGrace, then closes the read ends so they return.
func drainPipes(pipes *sync.WaitGroup, rs ...*os.File) {
	done := make(chan struct{})
	go func() { pipes.Wait(); close(done) }()
	t := time.NewTimer(PipeDrainGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		for _, r := range rs {
			_ = r.SetReadDeadline(time.Now())
		}
		<-done
	}
	for _, r := range rs {
		r.Close()
	}
}

func pumpStderr(r io.Reader, s Sinks) {
	br := bufio.NewReaderSize(r, 4096)
	for {
		line, err := readBoundedLine(br, maxStderrLine)
		if line != nil {
			text := strings.TrimSuffix(string(line), "\r")
			if s.Log != nil {
				s.Log("info", SanitizeLine(text, protocol.MaxLogMessageBytes, protocol.RedactedLogMessage))
			}
			if s.Output != nil {
				s.Output(SanitizeLine(text, protocol.MaxAttachOutputBytes, protocol.RedactedAttachOutput))
			}
		}
		if err != nil {
			return
		}
	}
}

// readBoundedLine reads one line; a line longer than bound is returned as
// bound+1 bytes (enough to be redacted) and the rest is discarded.
func readBoundedLine(br *bufio.Reader, bound int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line) <= bound {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if err != nil && len(line) == 0 {
			return nil, err
		}
		return line, err
	}
}

// limitedBuffer keeps at most limit bytes, remembers an overflow and
// calls onOver once when it happens. It deliberately does not embed
// bytes.Buffer: io.Copy would use the promoted ReadFrom and bypass the
// limit.
type limitedBuffer struct {
	buf    bytes.Buffer
	limit  int64
	over   bool
	onOver func()
	// lines, when set, takes the bytes instead of buf; n counts them.
	lines *lineSplitter
	n     int64
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	room := l.limit - int64(l.buf.Len()) - l.n
	if int64(len(p)) > room {
		l.over = true
		if room > 0 && l.lines == nil {
			l.buf.Write(p[:room])
		}
		if l.onOver != nil {
			l.onOver()
		}
		return len(p), nil
	}
	if l.lines != nil {
		l.n += int64(len(p))
		l.lines.write(p)
		return len(p), nil
	}
	return l.buf.Write(p)
}

// lineSplitter passes complete lines to emit and keeps the rest until the
// next write or flush.
type lineSplitter struct {
	emit func([]byte)
	rest []byte
}

func (s *lineSplitter) write(p []byte) {
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.rest = append(s.rest, p...)
			return
		}
		if len(s.rest) > 0 {
			s.emit(append(s.rest, p[:i+1]...))
			s.rest = nil
		} else {
			s.emit(p[:i+1])
		}
		p = p[i+1:]
	}
}

// flush passes the last line that had no newline, if any.
func (s *lineSplitter) flush() {
	if len(s.rest) > 0 {
		s.emit(s.rest)
		s.rest = nil
	}
}

func (l *limitedBuffer) Bytes() []byte { return l.buf.Bytes() }

// copyOut copies a program's standard output into dst. With decouple,
// the pipe is read by a goroutine of its own into a read-ahead buffer
// that dst takes at its pace: handling lines (parsing, publishing) must
// never leave the pipe full, since a CLI whose writes then block or come
// back short can interleave or drop part of a large event. The buffer is
// bounded in bytes, however small the program's writes: it holds at most
// min(limit, outReadAheadBytes), and the reader waits for room only when
// it is full. Bytes past limit in total are read and dropped (dst sees
// the overflow and the group is killed), so a program that floods its
// output holds no more memory here than the bound.
func copyOut(dst io.Writer, src io.Reader, decouple bool, limit int64) {
	if !decouple {
		_, _ = io.Copy(dst, src)
		return
	}
	copyReadAhead(dst, src, limit, min(limit, outReadAheadBytes))
}

// outReadAheadBytes bounds the standard output read ahead of a streamed
// program's line handler (Process.Lines), in bytes.
const outReadAheadBytes = 16 << 20

// outReadSize is the most one read of the pipe takes.
const outReadSize = 64 << 10

// readAhead is the byte-bounded buffer between the pipe reader and the
// consumer. Its fields are guarded by mu; peak is the most it ever held.
type readAhead struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	budget int64
	peak   int64
	done   bool
}

// copyReadAhead reads src ahead of dst through a buffer of at most budget
// bytes (at least one) and returns the most it held at once.
func copyReadAhead(dst io.Writer, src io.Reader, limit, budget int64) (peak int64) {
	ra := &readAhead{budget: max(budget, 1)}
	ra.cond = sync.NewCond(&ra.mu)
	go ra.fill(src, limit)
	var spare []byte
	for {
		ra.mu.Lock()
		for len(ra.buf) == 0 && !ra.done {
			ra.cond.Wait()
		}
		if len(ra.buf) == 0 {
			peak = ra.peak
			ra.mu.Unlock()
			return peak
		}
		chunk := ra.buf
		ra.buf = spare[:0]
		ra.cond.Broadcast()
		ra.mu.Unlock()
		_, _ = dst.Write(chunk)
		spare = chunk
	}
}

// fill reads src into the buffer, waiting while it is full, until src
// ends; past limit bytes in total it reads and drops.
func (ra *readAhead) fill(src io.Reader, limit int64) {
	defer func() {
		ra.mu.Lock()
		ra.done = true
		ra.cond.Broadcast()
		ra.mu.Unlock()
	}()
	buf := make([]byte, min(int64(outReadSize), ra.budget))
	var total int64
	for {
		room := int64(len(buf))
		if total <= limit {
			ra.mu.Lock()
			for int64(len(ra.buf)) >= ra.budget {
				ra.cond.Wait()
			}
			room = min(room, ra.budget-int64(len(ra.buf)))
			ra.mu.Unlock()
		}
		n, err := src.Read(buf[:room])
		if n > 0 && total <= limit {
			total += int64(n)
			ra.mu.Lock()
			ra.buf = append(ra.buf, buf[:n]...)
			ra.peak = max(ra.peak, int64(len(ra.buf)))
			ra.cond.Broadcast()
			ra.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}
