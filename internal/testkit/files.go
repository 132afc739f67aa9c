package testkit

import (
	"encoding/json"
	"os"
	"path/filepath"
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

// WriteJSON writes v as JSON to dir/name, readable by its owner only,
// and returns the file's path.
func WriteJSON(t testing.TB, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
