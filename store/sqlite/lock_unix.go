//go:build unix

package sqlite

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// dirLock is the exclusive lock on a data directory: flock on DIR/lock,
// held by an open descriptor for the Store's life. The kernel drops it when
// the process dies, however it dies, so a stale lock file never blocks a
// restart. The holder's pid is written into the file for the error message
// of the process that is refused.
type dirLock struct{ f *os.File }

func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &LockedError{Dir: dir, PID: readPID(f)}
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
	return &dirLock{f: f}, nil
}

// readPID returns the pid recorded by the lock holder, 0 if unknown (the
// holder may not have written it yet).
func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:n])))
	if err != nil {
		return 0
	}
	return pid
}

func (l *dirLock) unlock() error {
	// The pid stays in the file: it is only read while the lock is held.
	return l.f.Close()
}
