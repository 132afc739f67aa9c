package harness_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/oecp/oecp/engine/harness"
)

// testStall is the stall timeout of the stall tests: small, so that the
// test does not wait long; no assertion depends on its size, since the
// fake CLI never writes again.
const testStall = 200 * time.Millisecond

// TestStalledCLITurnEndsAsTimeout: a CLI that writes its first event and
// then nothing more is ended once it has been silent for the stall
// timeout: the execution ends as a timeout, its last line says why in
// plain words, and neither Codex nor Claude gets a continuation.
func TestStalledCLITurnEndsAsTimeout(t *testing.T) {
	for _, tc := range []struct{ cli, first string }{
		{"codex", `{"type":"thread.started","thread_id":"th-1"}`},
		{"claude", `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"error":"overloaded","session_id":"s-1"}`},
	} {
		t.Run(tc.cli, func(t *testing.T) {
			t.Setenv("CODEX_API_KEY", "sk-codex-test-key")
			f := newFakeCLI(t, tc.cli)
			f.action(0, "echo "+shellQuote(tc.first)+"; exec sleep 600")
			b, _ := json.Marshal(map[string]any{tc.cli: map[string]any{"argv": []string{filepath.Join(f.dir, "bin", tc.cli)}, "env": []string{"CODEX_API_KEY"}}})
			cfg, err := harness.Parse("harness.json", b)
			if err != nil {
				t.Fatal(err)
			}
			cfg.SetStallTimeout(testStall)
			r, err := cfg.Runner(tc.cli)
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			job := f.job(textStep(t), harness.Binding{Model: "m", Env: []string{"CODEX_API_KEY"}}, "openai")
			got := outcome(run(r, context.Background(), job, `{"text":"draft"}`, rec))
			if want := `{"status":"error","code":"timeout","reason":"declared_failure"}`; got != want || f.turns() != 1 {
				t.Fatalf("outcome %s after %d processes, want %s after 1\n%s", got, f.turns(), want, rec.text())
			}
			if want := "error: no output from the agent for 200ms: turn ended (--agent-stall-timeout)"; !rec.has(want) {
				t.Fatalf("no line %q:\n%s", want, rec.text())
			}
		})
	}
}
