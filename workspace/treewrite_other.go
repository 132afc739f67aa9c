//go:build !linux

package workspace

import "errors"

// keepsTrees reports whether this system writes kept trees: elsewhere
// git writes every checkout.
const keepsTrees = false

func writeKept(string, *keptTree, int) ([]gitIndexEntry, []fileStat, error) {
	return nil, nil, errors.ErrUnsupported
}

func takeWritten(string, []gitIndexEntry, []fileStat, int) ([]gitIndexEntry, []fileStat, error) {
	return nil, nil, errors.ErrUnsupported
}
