//go:build !unix

package main

// lockFile does not lock where flock is missing: the SQLite store (which
// refuses to open there) is the only guard.
func lockFile(_, _ string) (unlock func(), err error) { return func() {}, nil }
