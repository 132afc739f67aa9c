//go:build unix

package workspace

import (
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on path, creating the file, so that
// other processes sharing the directory wait for the holder; the returned
// function releases it. The kernel drops the lock when the process dies.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
