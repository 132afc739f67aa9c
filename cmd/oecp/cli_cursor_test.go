package main

import (
	"strings"
	"testing"
)

// TestCLIWatchUnknownCursor: watch --from a cursor the running run does
// not have says the cursor is what does not exist, not the run.
func TestCLIWatchUnknownCursor(t *testing.T) {
	srv := startServer(t)
	expect(t, oecp(t, srv, "apply", "-f", sleepy, "--input", sleepLong), 0, nil, nil)
	r := oecp(t, srv, "watch", "--from", "cursor-9999")
	expect(t, r, 1, nil, []string{`the run has no cursor "cursor-9999"`, "leave --from out"})
	if strings.Contains(r.stderr, "Run does not exist") {
		t.Errorf("watch --from an unknown cursor blames the run:\n%s", r.stderr)
	}
}
