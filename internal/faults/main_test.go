package faults

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/protocol"
)

var bin string

func TestMain(m *testing.M) { wiretest.MainWithBinary(m, &bin) }

// hangGuard bounds every wait. It is no timing assertion: nothing here
// should take more than a fraction of it, and reaching it means the test
// is stuck.
const hangGuard = time.Minute

// server is one `oecp serve` child process and what it wrote on stderr.
type server struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{} // closed once the process is reaped
	status error         // its exit status, set before exited closes

	mu      sync.Mutex
	lines   []string
	newLine chan struct{} // closed and replaced at every stderr line
}

var servingLine = regexp.MustCompile(`url=(ws://127\.0\.0\.1:\d+/oecp)`)

// launch runs argv (a command that ends by exec'ing `oecp serve`) and
// returns once the server names its URL, or fails with what it wrote when
// it exits first.
func launch(t *testing.T, argv ...string) (*server, error) {
	t.Helper()
	s := &server{cmd: exec.Command(argv[0], argv[1:]...), exited: make(chan struct{}), newLine: make(chan struct{})}
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go s.read(pipe)
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		testkit.Recv(t, s.exited)
	})
	line, err := s.await(servingLine.String())
	if err != nil {
		return nil, err
	}
	s.url = servingLine.FindStringSubmatch(line)[1]
	return s, nil
}

// serve launches `oecp serve` on loopback with args.
func serve(t *testing.T, args ...string) *server {
	t.Helper()
	s, err := launch(t, append([]string{bin, "serve", "--listen", "127.0.0.1:0"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *server) read(pipe interface{ Read([]byte) (int, error) }) {
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		s.mu.Lock()
		s.lines = append(s.lines, sc.Text())
		close(s.newLine)
		s.newLine = make(chan struct{})
		s.mu.Unlock()
	}
	s.status = s.cmd.Wait()
	close(s.exited)
}

// await returns the first stderr line matching the regular expression
// re, waiting for it; it fails when the process exits first.
func (s *server) await(re string) (string, error) {
	rx := regexp.MustCompile(re)
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	for seen := 0; ; {
		s.mu.Lock()
		lines, next := s.lines, s.newLine
		s.mu.Unlock()
		for ; seen < len(lines); seen++ {
			if rx.MatchString(lines[seen]) {
				return lines[seen], nil
			}
		}
		select {
		case <-next:
		case <-s.exited:
			s.mu.Lock()
			n := len(s.lines)
			s.mu.Unlock()
			if n > seen {
				continue
			}
			return "", fmt.Errorf("oecp serve exited (%w) before writing %q:\n%s", s.status, re, s.stderr())
		case <-guard.C:
			return "", fmt.Errorf("stuck waiting for %q in:\n%s", re, s.stderr())
		}
	}
}

func (s *server) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// stop sends sig and waits for the process to end.
func (s *server) stop(t *testing.T, sig os.Signal) error {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, s.exited)
	return s.status
}

func dial(t *testing.T, s *server) *client.Conn {
	t.Helper()
	c, err := client.Dial(context.Background(), s.url, client.DialOptions{AllowPlaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// guarded is a context bounded by hangGuard.
func guarded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// history replays run's events until stop says the last one ends what the
// test waits for.
func history(t *testing.T, c *client.Conn, run string, stop func(client.WatchEvent) bool) []client.WatchEvent {
	t.Helper()
	sub, _, err := c.Watch(guarded(t), client.WatchParams{RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	var es []client.WatchEvent
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("watch of %s ended: %v; events: %s", run, sub.Err(), describe(es))
			}
			es = append(es, ev)
			if stop(ev) {
				return es
			}
		case <-guard.C:
			t.Fatalf("stuck watching %s; events: %s", run, describe(es))
		}
	}
}

func finished(ev client.WatchEvent) bool { return ev.Event.Type == protocol.EventFinished }

// describe lists events as "cursor type node#attempt".
func describe(es []client.WatchEvent) string {
	var b strings.Builder
	for _, ev := range es {
		fmt.Fprintf(&b, "\n  %s %s", ev.Cursor, ev.Event.Type)
		if n := ev.Event.Node; n != nil {
			fmt.Fprintf(&b, " %s#%d", n.Node, n.Attempt)
		}
		if len(ev.Event.Outcome) > 0 {
			b.WriteString(" " + string(ev.Event.Outcome))
		}
		if len(ev.Event.Fault) > 0 {
			b.WriteString(" " + string(ev.Event.Fault))
		}
	}
	return b.String()
}

// terminal is get's terminal result, which must be there.
func terminal(t *testing.T, c *client.Conn) string {
	t.Helper()
	r, err := c.Get(guarded(t), client.GetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if r.TerminalResult == nil {
		t.Fatalf("no terminal result: %+v", r.Status)
	}
	out := r.TerminalResult.Status + " " + r.TerminalResult.Reason
	if r.TerminalResult.Output != nil {
		out = r.TerminalResult.Status + " " + string(*r.TerminalResult.Output)
	}
	return out
}
