//go:build unix

// Package pidlock takes an exclusive, process-lifetime lock on a file:
// flock on an open descriptor, which the kernel drops when the process
// dies however it dies (a stale file never blocks a restart), with the
// holder's pid written into the file for the message of a process that is
// refused.
package pidlock

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// HeldError is a lock another process holds; PID is the pid it wrote (0
// if unknown: it may not have written it yet).
type HeldError struct{ PID int }

func (e *HeldError) Error() string { return fmt.Sprintf("locked by pid %d", e.PID) }

// Lock takes the lock on path, creating the file, and returns its
// release. A lock another process holds is a *HeldError.
func Lock(path string) (unlock func() error, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &HeldError{PID: holder(f)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close() // releases the lock
		return nil, fmt.Errorf("write lock file: %w", err)
	}
	// The pid stays in the file: it is only read while the lock is held.
	return f.Close, nil
}

// holder is the pid the lock's holder wrote, 0 if unknown.
func holder(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:n])))
	if err != nil {
		return 0
	}
	return pid
}
