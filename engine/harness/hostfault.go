package harness

import (
	"errors"
	"syscall"
)

// hostReason is the fixed sentence, shown in the run's log, for an error
// of the host's own resources: a full disk or quota, no file descriptors
// left. Any other error gives otherwise ("" when otherwise is ""). What
// the error says in full goes to the server log only.
func hostReason(err error, otherwise string) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "no space left on the server's disk"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "the server ran out of file descriptors"
	}
	return otherwise
}
