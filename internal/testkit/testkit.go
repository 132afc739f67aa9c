// Package testkit is what the tests of many packages share: a TestMain that
// fails a package's tests when any of them leaves a goroutine running,
// bounded waits (HangGuard, Recv, RecvOK, Awaited, Wait, Bounded),
// processes watched through pidfds or /proc (Pidfd, Exited, Stop,
// ProcState), and file and disk helpers (WriteFile, TreeBytes, FillDisk).
// It is imported by tests only.
package testkit

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// HangGuard bounds the tests' waits outside a synctest bubble. It is no
// timing assertion: nothing waited for should take more than a fraction
// of it, and reaching it means the test is stuck, which fails it instead
// of hanging it.
const HangGuard = 2 * time.Minute

// Main runs the package's tests (m may wrap a *testing.M, to prepare
// something around the run) and fails them when any of them leaves a
// goroutine running. A package's TestMain is
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
func Main(m goleak.TestingM, opts ...goleak.Option) { goleak.VerifyTestMain(m, opts...) }

// Recv receives from ch, failing the test when nothing comes within
// HangGuard.
func Recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(HangGuard):
		t.Fatalf("nothing received within %v: the test is stuck", HangGuard)
	}
	var zero T
	return zero
}

// RecvOK is Recv that also reports, as a receive's second value does,
// whether the value came from a send (false: ch is closed).
func RecvOK[T any](t testing.TB, ch <-chan T) (T, bool) {
	t.Helper()
	select {
	case v, ok := <-ch:
		return v, ok
	case <-time.After(HangGuard):
		t.Fatalf("nothing received within %v: the test is stuck", HangGuard)
	}
	var zero T
	return zero, false
}

// Wait waits for wg (a sync.WaitGroup, or anything whose Wait returns
// once the goroutines it counts have ended), failing the test when it has
// not returned within HangGuard. The goroutines that are stuck then are
// left running: the test has failed.
func Wait(t testing.TB, wg interface{ Wait() }) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(HangGuard):
		t.Fatalf("the goroutines waited for have not ended within %v: the test is stuck", HangGuard)
	}
}

// CompletesWhileHeld runs op while another operation is held (in a test
// hook that waits until release is closed) and returns op's error. op
// must return within bound: when it does not, it waited for the held
// operation (a lock held across the hook), and t fails with why, after
// release and op's return. release is closed when CompletesWhileHeld
// returns.
func CompletesWhileHeld(t testing.TB, release chan<- struct{}, bound time.Duration, op func() error, why string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		close(release)
		return err
	case <-time.After(bound):
		close(release)
		Recv(t, done)
		t.Fatal(why)
		return nil
	}
}

// Awaited waits for a value on ch; when none comes within HangGuard it
// reports the test stuck and returns false. Unlike Recv it may be called
// off the test's goroutine.
func Awaited[T any](t testing.TB, ch <-chan T) bool {
	t.Helper()
	select {
	case <-ch:
		return true
	case <-time.After(HangGuard):
		t.Errorf("nothing received within %v: the test is stuck", HangGuard)
		return false
	}
}

// Bounded is a context that ends HangGuard from now, for a wait that
// returns an error when its context ends.
func Bounded(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	t.Cleanup(cancel)
	return ctx
}

// WriteFile writes n bytes of data (real blocks, not a hole) to path,
// making its directory.
func WriteFile(t testing.TB, path string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat("x", n)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TreeBytes is the sum of the sizes of the files under dir.
func TreeBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ProcState is the state letter of pid in /proc/PID/stat ("" when it is
// gone, "?" when the line does not parse).
func ProcState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return "?"
}

// FillDisk writes path until its file system is full.
func FillDisk(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 64<<10)
	for {
		if _, err := f.Write(block); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// Pidfd opens a pidfd of pid, closed at the test's end; -1 when pid is
// gone.
func Pidfd(t testing.TB, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return -1
		}
		t.Fatalf("pidfd of %d: %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// Exited waits at most d until the process of the pidfd fd has exited (a
// pidfd becomes readable then, zombie or reaped) and reports whether it
// has; fd -1 (Pidfd of a gone process) has.
func Exited(fd int, d time.Duration) bool {
	if fd < 0 {
		return true
	}
	deadline := time.Now().Add(d)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, max(int(time.Until(deadline)/time.Millisecond), 0))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n == 1
	}
}

// Stop sends sig to pid (a process of the test's, not necessarily its
// child) and waits at most d for it to exit; when it does not, it is
// SIGKILLed and Stop reports false.
func Stop(t testing.TB, pid int, sig syscall.Signal, d time.Duration) bool {
	t.Helper()
	fd := Pidfd(t, pid)
	if fd < 0 {
		return true
	}
	_ = unix.PidfdSendSignal(fd, sig, nil, 0)
	if Exited(fd, d) {
		return true
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	return false
}
