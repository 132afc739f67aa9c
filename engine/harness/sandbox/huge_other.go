//go:build !amd64

package sandbox

import "errors"

// remoteMadvise is built for x86-64 only: elsewhere pasta runs on small
// pages.
func remoteMadvise(pid int, addr, length uintptr, advice int) (int, error) {
	return 0, errors.ErrUnsupported
}
