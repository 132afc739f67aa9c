//go:build !unix

package sqlite

import "errors"

type dirLock struct{}

func lockDir(string) (*dirLock, error) {
	return nil, errors.New("store/sqlite: data directory locking needs a unix system")
}

func (*dirLock) unlock() error { return nil }
