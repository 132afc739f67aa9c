//go:build unix

package sqlite

import (
	"errors"
	"path/filepath"

	"github.com/oecp/oecp/internal/pidlock"
)

// dirLock is the exclusive lock on a data directory, DIR/lock, held for
// the Store's life (pidlock: dropped by the kernel when the process dies).
type dirLock struct{ release func() error }

func lockDir(dir string) (*dirLock, error) {
	release, err := pidlock.Lock(filepath.Join(dir, lockFile))
	var held *pidlock.HeldError
	if errors.As(err, &held) {
		return nil, &LockedError{Dir: dir, PID: held.PID}
	}
	if err != nil {
		return nil, err
	}
	return &dirLock{release: release}, nil
}

func (l *dirLock) unlock() error { return l.release() }
