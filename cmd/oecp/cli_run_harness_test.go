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

// TestCLIRunWatchSaysHowExecutionsEnded: the line of an ending execution
// says its outcome, and for a failure the last line the agent wrote (why
// it failed), also when the run succeeds because its graph does not route
// the failure; run logs ends the execution's records with the same.
func TestCLIRunWatchSaysHowExecutionsEnded(t *testing.T) {
	file := filepath.Join(t.TempDir(), "harness.json")
	if err := os.WriteFile(file, []byte(`{"codex":{"driver":"command","argv":["/bin/sh","/nonexistent/agent.sh"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--harness", file)
	submit := []string{"run", "submit", "-f", stepGraph, "--runtime", stepRuntime, "--source", testSource, "--id", "ends-1"}
	want := "work ended (execution ends-1/work/1): failed (crash: declared_failure); last line: /bin/sh: "
	expect(t, oecp(t, srv, append(submit, "--watch")...), 0, []string{want, "cannot open /nonexistent/agent.sh", "run ends-1 succeeded"}, nil)
	expect(t, oecp(t, srv, "run", "watch", "ends-1"), 0, []string{want}, nil)
	expect(t, oecp(t, srv, "run", "logs", "ends-1"), 0, []string{"warn  work/1: execution ended: failed (crash: declared_failure)\n"}, nil)
}
