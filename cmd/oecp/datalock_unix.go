//go:build unix

package main

import (
	"errors"
	"fmt"

	"github.com/oecp/oecp/internal/pidlock"
)

// lockFile takes the data directory's lock at path, with this process's
// pid in it for the message of a server that is refused.
func lockFile(dir, path string) (unlock func(), err error) {
	release, err := pidlock.Lock(path)
	var held *pidlock.HeldError
	switch {
	case errors.As(err, &held):
		return nil, &DataDirInUseError{Dir: dir, PID: held.PID}
	case err != nil:
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	return func() { _ = release() }, nil
}
