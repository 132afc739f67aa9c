package harness_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/harness"
)

func TestClaudeTurn(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
	t.Setenv("LANG", "C.UTF-8")
	f := newFakeCLI(t, "claude")
	rec := f.fixtureTurn("claude-success.jsonl", harness.Binding{Model: "claude-sonnet-5", Effort: "max", Env: []string{"ANTHROPIC_API_KEY"}}, "anthropic")
	argv := f.argv(0)
	want := []string{"--print", "--input-format", "text", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
		"--setting-sources", "user", "--strict-mcp-config", "--model", "claude-sonnet-5", "--effort", "max", "--dangerously-skip-permissions"}
	if !slices.Equal(argv[:len(want)], want) || !strings.HasPrefix(argv[len(want)], "Execute this graph node") {
		t.Fatalf("argv %q", argv)
	}
	if f.stdin(0) != "" {
		t.Fatalf("stdin %q", f.stdin(0))
	}
	env := f.env(0)
	home := filepath.Join(f.run, "writer-execution-12")
	if env["ANTHROPIC_API_KEY"] != "sk-ant-secret" || env["HOME"] != home || env["TMPDIR"] != home || env["LANG"] != "C.UTF-8" || env["PATH"] == "" {
		t.Fatalf("env %v", env)
	}
	for k := range env {
		if !slices.Contains([]string{"ANTHROPIC_API_KEY", "HOME", "TMPDIR", "LANG", "LC_ALL", "TERM", "PATH", "IS_SANDBOX"}, k) {
			t.Fatalf("unexpected variable %s", k)
		}
	}
	// As root, Claude Code skips permission prompts only with IS_SANDBOX=1.
	if root := os.Geteuid() == 0; (env["IS_SANDBOX"] == "1") != root {
		t.Fatalf("IS_SANDBOX=%q as root=%v", env["IS_SANDBOX"], root)
	}
	// Deltas come out as whole lines, the assistant message does not
	// repeat them, and the tool call is a system line.
	lines := strings.Split(rec.text(), "\n")
	for _, line := range []string{"debug: The notes need work.", "info: I rewrote the notes.", "info: Done.", `debug: tool Edit {"file_path":"notes.txt"}`, `info: {"text":"better"}`} {
		if n := slices.Index(lines, line); n < 0 {
			t.Errorf("missing %q in\n%s", line, rec.text())
		}
	}
	if n := strings.Count(rec.text(), "info: Done."); n != 1 {
		t.Errorf("text emitted %d times:\n%s", n, rec.text())
	}
}

// A verifier plans, never edits; a correction resumes the session.
func TestClaudeVerifierCorrectionResumes(t *testing.T) {
	f := newFakeCLI(t, "claude")
	f.events(0, claudeTurn("s-1", `{"output":true,"signals":{"verdict":"maybe"},"diagnostic":{"message":"ok"}}`)...)
	f.events(1, claudeTurn("s-1", `{"output":true,"signals":{"verdict":"approved"},"diagnostic":{"message":"ok"}}`)...)
	b := harness.Binding{Model: "claude-haiku-4-5"}
	if s := f.exec(reviewVerifier(t), b, "anthropic", `null`, &recorder{}); !strings.HasPrefix(s, `{"status":"verifier"`) {
		t.Fatalf("outcome %s", s)
	}
	first, second := f.argv(0), f.argv(1)
	if indexOf(first, "--effort") >= 0 || indexOf(first, "--resume") >= 0 || indexOf(first, "plan") != indexOf(first, "--permission-mode")+1 {
		t.Fatalf("first argv %q", first)
	}
	if i := indexOf(second, "--resume"); i < 0 || second[i+1] != "s-1" || !strings.HasPrefix(second[i+2], "Your previous answer was rejected") || !strings.Contains(strings.Join(second[i+2:], "\n"), "Validation error:") {
		t.Fatalf("correction argv %q", second)
	}
}

func TestClaudeProviderFailure(t *testing.T) {
	retry := `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"error":"overloaded","session_id":"s-1"}`
	failed := `{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["Overloaded"],"session_id":"s-1"}`
	for _, tc := range []struct {
		name    string
		first   []string
		turns   int
		want    string
		resumed bool
	}{
		{"failed result", []string{failed}, 1, wantCrash, false},
		{"error result", []string{`{"type":"result","subtype":"success","is_error":true,"result":"Credit balance is too low","session_id":"s-1"}`}, 1, wantCrash, false},
		{"failed after api retry", []string{retry, failed}, 2, wantVerified, true},
		{"no result after api retry", []string{retry}, 2, wantVerified, true},
		{"no result", []string{`{"type":"system","subtype":"init","session_id":"s-1"}`}, 1, wantCrash, false},
		{"empty line", []string{`{"type":"system","subtype":"init"}`, ``, claudeTurn("s-1", "x")[2]}, 1, wantCrash, false},
		{"line after result", append(claudeTurn("s-1", `{"text":"better"}`), `{"type":"system","subtype":"init"}`), 1, wantCrash, false},
		{"session changed", []string{`{"type":"system","subtype":"init","session_id":"s-1"}`, claudeTurn("s-2", `{"text":"better"}`)[2]}, 1, wantCrash, false},
		{"no type", []string{`{"session_id":"s-1"}`}, 1, wantCrash, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCLI(t, "claude")
			f.events(0, tc.first...)
			f.exit(0, 1)
			f.events(1, claudeTurn("s-1", `{"text":"better"}`)...)
			rec := &recorder{}
			if s := f.exec(textStep(t), harness.Binding{Model: "claude-opus-5", Effort: "low"}, "anthropic", `{"text":"draft"}`, rec); s != tc.want || f.turns() != tc.turns {
				t.Fatalf("outcome %s after %d processes\n%s", s, f.turns(), rec.text())
			}
			if !strings.Contains(rec.text(), "error: Claude provider failure: ") {
				t.Fatalf("no failure line:\n%s", rec.text())
			}
			if tc.resumed {
				argv := f.argv(1)
				if i := indexOf(argv, "--resume"); i < 0 || argv[i+1] != "s-1" || argv[len(argv)-1] != "Continue" {
					t.Fatalf("continuation argv %q", argv)
				}
			}
		})
	}
}

// A successful result needs exit status 0 and a trailing newline.
func TestClaudeSuccessNeedsCleanEnd(t *testing.T) {
	f := newFakeCLI(t, "claude")
	f.events(0, claudeTurn("s-1", `{"text":"better"}`)...)
	f.exit(0, 3)
	if s := f.exec(textStep(t), harness.Binding{Model: "claude-opus-5"}, "anthropic", `{"text":"draft"}`, &recorder{}); s != wantCrash {
		t.Fatalf("exit 3: %s", s)
	}
	f = newFakeCLI(t, "claude")
	f.write("events/0", strings.Join(claudeTurn("s-1", `{"text":"better"}`), "\n"))
	if s := f.exec(textStep(t), harness.Binding{Model: "claude-opus-5"}, "anthropic", `{"text":"draft"}`, &recorder{}); s != wantCrash {
		t.Fatalf("no final newline: %s", s)
	}
}

func TestClaudeOpenRouterEnv(t *testing.T) {
	f := newFakeCLI(t, "claude")
	f.events(0, claudeTurn("s-1", `{"text":"better"}`)...)
	t.Setenv("OPENROUTER_API_KEY", "or-secret")
	b := harness.Binding{Model: "claude-sonnet-5", Env: []string{"OPENROUTER_API_KEY"}}
	f.mustVerify(b, "openrouter")
	env := f.env(0)
	if env["ANTHROPIC_AUTH_TOKEN"] != "or-secret" || env["ANTHROPIC_API_KEY"] != "" || env["ANTHROPIC_BASE_URL"] != "https://openrouter.ai/api" {
		t.Fatalf("env %v", env)
	}
	// A declared base variable or a forbidden one never starts a process.
	for _, name := range []string{"TMPDIR", "CLAUDE_CONFIG_DIR"} {
		t.Setenv(name, "/x")
		f := newFakeCLI(t, "claude")
		b := harness.Binding{Model: "claude-sonnet-5", Env: []string{name}}
		if s := f.exec(textStep(t), b, "anthropic", `{"text":"draft"}`, &recorder{}); s != wantCrash || f.turns() != 0 {
			t.Fatalf("%s: %s after %d processes", name, s, f.turns())
		}
	}
}

// A hung CLI is killed with its whole process group when the node's
// timeout passes, and the execution ends as timeout.
func TestHungCLIKilledAtNodeTimeout(t *testing.T) {
	for _, name := range []string{"codex", "claude"} {
		t.Run(name, func(t *testing.T) {
			f := newFakeCLI(t, name)
			f.action(0, `sleep 1000 & echo "child $!" >&2; echo ready >&2; wait`)
			t.Setenv("CODEX_API_KEY", "k")
			rec := &recorder{}
			ready := rec.await("out: ready")
			ctx := newDeadlineCtx()
			go func() { <-ready; ctx.expire() }()
			b := harness.Binding{Model: "m", Env: []string{"CODEX_API_KEY"}}
			got := run(f.runner("CODEX_API_KEY"), ctx, f.job(textStep(t), b, "openai"), `{"text":"draft"}`, rec)
			ctx.expire()
			if s := outcome(got); s != `{"status":"error","code":"timeout","reason":"declared_failure"}` || f.turns() != 1 {
				t.Fatalf("outcome %s after %d processes", s, f.turns())
			}
			waitDead(t, childPid(t, rec, "debug: child "))
		})
	}
}
