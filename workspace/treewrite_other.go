//go:build !linux

package workspace

import "errors"

// writeKept is Linux's only: elsewhere git writes every checkout.
func writeKept(string, *keptTree, int) ([]gitIndexEntry, []fileStat, error) {
	return nil, nil, errors.ErrUnsupported
}

// keepsTrees reports whether this system writes kept trees.
const keepsTrees = false
