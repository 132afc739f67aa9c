package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIRunSubmitHarnessRefusal: a plan using a harness the server's
// harness file does not declare is refused without the file's path and
// without telling the client to fix what the operator owns; the path is
// in the server's log.
func TestCLIRunSubmitHarnessRefusal(t *testing.T) {
	file := filepath.Join(t.TempDir(), "operator-harness.json")
	if err := os.WriteFile(file, []byte(`{"claude":{"driver":"command","argv":["/bin/true"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--harness", file)
	r := oecp(t, srv, "run", "submit", "-f", stepGraph, "--runtime", stepRuntime, "--source", testSource)
	expect(t, r, 1, nil, []string{`harness "codex"`, "operator"})
	for _, leak := range []string{file, "operator-harness.json", "fix the submission"} {
		if strings.Contains(r.stderr, leak) {
			t.Errorf("the refusal shows %q:\n%s", leak, r.stderr)
		}
	}
	srv.waitLog(t, file)
}
