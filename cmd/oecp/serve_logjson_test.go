package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestServeLogFormatJSONCoversHarness: with --log-format json every line
// the server writes is a JSON object, the agent harness's "harness turn"
// and "agent execution failed" lines included.
func TestServeLogFormatJSONCoversHarness(t *testing.T) {
	file := filepath.Join(t.TempDir(), "harness.json")
	if err := os.WriteFile(file, []byte(`{"codex":{"driver":"command","argv":["/bin/sh","/nonexistent/agent.sh"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--harness", file, "--log-format", "json")
	expect(t, oecp(t, srv, "run", "submit", "-f", stepGraph, "--runtime", stepRuntime, "--source", testSource, "--id", "json-1", "--watch"), 0, nil, nil)
	var turn, failed bool
	for line := range srv.logs {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		turn = turn || rec["msg"] == "harness turn"
		failed = failed || rec["msg"] == "agent execution failed"
		if turn && failed {
			return
		}
	}
	t.Fatalf("the log ended without the harness lines (turn %v, failed %v)", turn, failed)
}
