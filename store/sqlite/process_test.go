package sqlite_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/sqlite"
)

// The tests below re-execute the test binary as a child process; TestMain
// runs runChild instead of the tests when childEnv is set.
const (
	childEnv  = "OECP_SQLITE_TEST_CHILD" // "commit" or "hold"
	dirEnv    = "OECP_SQLITE_TEST_DIR"
	syncEnv   = "OECP_SQLITE_TEST_SYNC"
	readyLine = "ready"
)

func runChild(mode string) int {
	s, err := sqlite.Open(ctx, sqlite.Options{Dir: os.Getenv(dirEnv), Sync: os.Getenv(syncEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	switch mode {
	case "hold": // hold the directory until stdin closes
		fmt.Println(readyLine)
		_, _ = io.Copy(io.Discard, os.Stdin)
	case "commit": // commit forever, printing each acknowledged sequence
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateRun("t", store.Run{ID: "r"}) }); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		for i := uint64(1); ; i++ {
			var seq uint64
			err := s.Update(ctx, func(tx store.Tx) error { return commitOne(tx, i, &seq) })
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			// os.Stdout is unbuffered: the line is out before the next commit.
			fmt.Println(seq)
		}
	}
	return 0
}

// commitOne is the i-th commit of the crash test: state, an event, an
// idempotency receipt and a counter, all in one transaction.
func commitOne(tx store.Tx, i uint64, seq *uint64) error {
	c, _, err := tx.Cluster("t")
	if err != nil {
		return err
	}
	if err := tx.PutCluster("t", store.Cluster{Version: c.Version + 1, Data: []byte(strconv.FormatUint(i, 10))}); err != nil {
		return err
	}
	ev, err := tx.AppendEvent("t", "r", body)
	if err != nil {
		return err
	}
	if err := tx.PutIdempotency("t", "k-"+strconv.FormatUint(ev.Seq, 10), store.Receipt{Fingerprint: "f", Result: []byte("{}")}); err != nil {
		return err
	}
	if _, err := tx.NextCounter("n"); err != nil {
		return err
	}
	*seq = ev.Seq
	return nil
}

func startChild(t *testing.T, mode, dir, sync string) (*exec.Cmd, *bufio.Scanner, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, dirEnv+"="+dir, syncEnv+"="+sync)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, bufio.NewScanner(stdout), stdin
}

// TestCrashKeepsAcknowledgedCommits kills a committing child with SIGKILL
// mid-stream and reopens its directory: every commit the child
// acknowledged is there, whole, and the sequence has no gaps. This holds
// in both sync modes (a process crash; power loss is not simulated).
func TestCrashKeepsAcknowledgedCommits(t *testing.T) {
	const killAfter = 200
	for _, mode := range syncModes {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			cmd, out, _ := startChild(t, "commit", dir, mode)
			var acked uint64
			for out.Scan() {
				n, err := strconv.ParseUint(out.Text(), 10, 64)
				if err != nil || n != acked+1 {
					t.Fatalf("child printed %q after %d", out.Text(), acked)
				}
				acked = n
				if acked == killAfter {
					must(t, cmd.Process.Signal(syscall.SIGKILL))
				}
			}
			// Lines printed before the kill landed are acknowledged too.
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die of SIGKILL: %v", err)
			}
			if acked < killAfter {
				t.Fatalf("child acknowledged only %d commits", acked)
			}

			s := open(t, dir, mode)
			defer s.Close()
			var last uint64
			must(t, s.View(ctx, func(tx store.ReadTx) error {
				var err error
				if last, err = tx.LastSeq(); err != nil {
					return err
				}
				if last < acked {
					return fmt.Errorf("LastSeq %d < %d acknowledged commits", last, acked)
				}
				c, _, _ := tx.Cluster("t")
				if c.Version != last || string(c.Data) != strconv.FormatUint(last, 10) {
					return fmt.Errorf("cluster v%d %q, want v%d: a commit was torn", c.Version, c.Data, last)
				}
				r, _, _ := tx.Run("t", "r")
				if r.Count != last || r.FirstSeq != 1 || r.LastSeq != last {
					return fmt.Errorf("run record %+v, want %d events", r, last)
				}
				evs, err := tx.Events("t", "r", 0, int(last)+10)
				if err != nil {
					return err
				}
				if uint64(len(evs)) != last {
					return fmt.Errorf("%d events, want %d", len(evs), last)
				}
				for i, ev := range evs {
					if ev.Seq != uint64(i+1) || ev.Index != uint64(i+1) {
						return fmt.Errorf("gap: event %d has seq %d index %d", i, ev.Seq, ev.Index)
					}
					if _, ok, _ := tx.Idempotency("t", "k-"+strconv.FormatUint(ev.Seq, 10)); !ok {
						return fmt.Errorf("receipt of commit %d lost", ev.Seq)
					}
				}
				return nil
			}))
			must(t, s.Update(ctx, func(tx store.Tx) error {
				if v, err := tx.NextCounter("n"); err != nil || v != last+1 {
					return fmt.Errorf("counter %d %v, want %d", v, err, last+1)
				}
				return nil
			}))
			t.Logf("%s: %d acknowledged, %d recovered", mode, acked, last)
		})
	}
}

// TestLockAcrossProcesses: a second process on a held directory fails at
// once naming the holder; when the holder dies (SIGKILL, no cleanup) the
// directory is free again.
func TestLockAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	cmd, out, _ := startChild(t, "hold", dir, "")
	if !out.Scan() || out.Text() != readyLine {
		t.Fatalf("child: %q %v", out.Text(), out.Err())
	}
	_, err := sqlite.Open(ctx, sqlite.Options{Dir: dir})
	want := fmt.Sprintf("data directory %s is in use by another oecp serve (pid %d)", dir, cmd.Process.Pid)
	if !errors.Is(err, sqlite.ErrLocked) || !strings.Contains(fmt.Sprint(err), want) {
		t.Fatalf("Open of a held directory: %v, want %q", err, want)
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	s := open(t, dir, "")
	must(t, s.Close())
}
