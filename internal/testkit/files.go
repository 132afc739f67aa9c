package testkit

import (
	"os"
	"testing"
)

// ReadFile is the content of the file at path; the test fails if it
// cannot be read.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
