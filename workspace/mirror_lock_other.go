//go:build !unix

package workspace

// lockFile is a no-op where flock is missing: mirrors are then locked
// within the process only.
func lockFile(string) (func(), error) { return func() {}, nil }
