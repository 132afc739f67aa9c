package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/harness"
)

func TestCodexTurn(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-openai-secret")
	f := newFakeCLI(t, "codex")
	rec := f.fixtureTurn("codex-success.jsonl", harness.Binding{Model: "gpt-5.6", Effort: "high", Env: []string{"OPENAI_API_KEY"}}, "openai")
	want := []string{"exec", "--sandbox", "workspace-write", "--config", `model_provider="openai"`,
		"--config", `approval_policy="never"`, "--config", "sandbox_workspace_write.network_access=true",
		"--config", `model_reasoning_effort="high"`, "--config", `web_search="disabled"`,
		"--json", "--model", "gpt-5.6", "--skip-git-repo-check", "-"}
	if argv := f.argv(0); !slices.Equal(argv, want) {
		t.Fatalf("argv\n%q\nwant\n%q", argv, want)
	}
	if p := f.stdin(0); !strings.HasPrefix(p, "Execute this graph node") || !strings.Contains(p, "Input JSON:\n{\"text\":\"draft\"}") {
		t.Fatalf("stdin is not the prompt:\n%s", p)
	}
	if cwd := strings.TrimSpace(f.read("calls/0.cwd")); cwd != f.work {
		t.Fatalf("cwd %s", cwd)
	}
	// Only the key (renamed), the private home, a temporary directory in
	// it and PATH reach the process; the execution's home is gone once it
	// ended.
	env := f.env(0)
	home := filepath.Join(f.run, "writer-execution-12")
	if len(env) != 5 || env["CODEX_API_KEY"] != "sk-openai-secret" || env["CODEX_HOME"] != home || env["HOME"] != home ||
		env["TMPDIR"] != filepath.Join(home, "tmp") || env["PATH"] != os.Getenv("PATH") {
		t.Fatalf("env %v", env)
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Fatalf("execution home left behind: %v", err)
	}
	for _, line := range []string{
		"debug: turn started", "debug: reasoning: **Reading the file**",
		"debug: command: bash -lc 'cat notes.txt' (in_progress)", "debug: command: bash -lc 'cat notes.txt' (completed, exit 0)",
		"debug: file change: update notes.txt", "debug: todo: [x] edit notes; [ ] answer",
		"info: I rewrote the notes.", "info: Done.", `info: {"text":"better"}`, "out: Done.",
	} {
		if !rec.has(line) {
			t.Errorf("missing %q in\n%s", line, rec.text())
		}
	}
}

func TestCodexVerifierAndOpenRouter(t *testing.T) {
	f := newFakeCLI(t, "codex")
	f.events(0, codexTurn("th-1", `{"output":true,"signals":{"verdict":"approved"},"diagnostic":{"message":"ok"}}`)...)
	t.Setenv("OPENROUTER_API_KEY", "or-secret")
	b := harness.Binding{Model: "gpt-5.6", Effort: "max", Env: []string{"OPENROUTER_API_KEY"}}
	if s := f.exec(reviewVerifier(t), b, "openrouter", `null`, &recorder{}); !strings.HasPrefix(s, `{"status":"verifier"`) {
		t.Fatalf("outcome %s", s)
	}
	argv := strings.Join(f.argv(0), " ")
	for _, part := range []string{
		`exec --sandbox read-only --config model_provider="openrouter" --config model_providers.openrouter.name="OpenRouter" --config model_providers.openrouter.base_url="https://openrouter.ai/api/v1" --config model_providers.openrouter.env_key="OPENROUTER_API_KEY" --config model_providers.openrouter.wire_api="responses"`,
		`--config approval_policy="never" --config model_reasoning_effort="max" --config web_search="disabled" --json --model openai/gpt-5.6`,
	} {
		if !strings.Contains(argv, part) {
			t.Fatalf("argv lacks %q:\n%s", part, argv)
		}
	}
	if env := f.env(0); env["OPENROUTER_API_KEY"] != "or-secret" || env["HOME"] != filepath.Join(f.run, "verifier-execution-12") {
		t.Fatalf("env %v", env)
	}
}

// A correction turn resumes the thread the first turn reported.
func TestCodexCorrectionResumesThread(t *testing.T) {
	f := newFakeCLI(t, "codex")
	f.events(0, codexTurn("th-1", "```json\n{\"text\":\"better\"}\n```")...)
	f.events(1, codexTurn("th-1", `{"text":"better"}`)...)
	t.Setenv("CODEX_API_KEY", "k")
	b := harness.Binding{Model: "gpt-5.6", Env: []string{"CODEX_API_KEY"}}
	f.mustVerify(b, "openai")
	argv := f.argv(1)
	if i := indexOf(argv, "resume"); i < 0 || argv[len(argv)-2] != "th-1" || argv[len(argv)-1] != "-" || indexOf(argv, "--json") < i {
		t.Fatalf("correction argv %q", argv)
	}
	// Codex 0.148 drops the --config overrides before `resume` once any
	// follows it; --sandbox belongs to exec, before it.
	r := indexOf(argv, "resume")
	for i, a := range argv {
		if (a == "--config" && i < r) || (a == "--sandbox" && i > r) {
			t.Fatalf("%s at %d, resume at %d: %q", a, i, r, argv)
		}
	}
	if p := f.stdin(1); !strings.Contains(p, "Validation error:") || strings.Contains(p, "draft") {
		t.Fatalf("correction prompt:\n%s", p)
	}
}

func TestCodexMalformedAfterTwoCorrections(t *testing.T) {
	f := newFakeCLI(t, "codex")
	for n := range 3 {
		f.events(n, codexTurn("th-1", `{"text":7}`)...)
	}
	t.Setenv("CODEX_API_KEY", "k")
	b := harness.Binding{Model: "gpt-5.6", Env: []string{"CODEX_API_KEY"}}
	if s := f.exec(textStep(t), b, "openai", `{"text":"draft"}`, &recorder{}); s != wantMalformed || f.turns() != 3 {
		t.Fatalf("outcome %s after %d turns", s, f.turns())
	}
	for n := 1; n < 3; n++ {
		if argv := f.argv(n); argv[len(argv)-2] != "th-1" {
			t.Fatalf("turn %d did not resume: %q", n, argv)
		}
	}
}

// A failed turn continues once with "Continue" in the same thread; a
// second failure is a crash.
func TestCodexProviderFailure(t *testing.T) {
	failed := []string{`{"type":"thread.started","thread_id":"th-1"}`, `{"type":"turn.started"}`, `{"type":"turn.failed","error":{"message":"stream disconnected before completion"}}`}
	for _, tc := range []struct {
		name   string
		second []string
		want   string
	}{
		{"continued", codexTurn("th-1", `{"text":"better"}`), wantVerified},
		{"failed twice", []string{`{"type":"error","message":"rate limited"}`}, wantCrash},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCLI(t, "codex")
			f.events(0, failed...)
			f.exit(0, 1) // a reported failure counts whatever the exit status
			f.events(1, tc.second...)
			t.Setenv("CODEX_API_KEY", "k")
			rec := &recorder{}
			b := harness.Binding{Model: "gpt-5.6", Env: []string{"CODEX_API_KEY"}}
			if s := f.exec(textStep(t), b, "openai", `{"text":"draft"}`, rec); s != tc.want || f.turns() != 2 {
				t.Fatalf("outcome %s after %d processes\n%s", s, f.turns(), rec.text())
			}
			if argv := f.argv(1); argv[len(argv)-2] != "th-1" || f.stdin(1) != "Continue" {
				t.Fatalf("continuation argv %q stdin %q", argv, f.stdin(1))
			}
			if !rec.has("error: Codex provider failure: stream disconnected before completion") {
				t.Fatalf("no failure line:\n%s", rec.text())
			}
		})
	}
}

// Stream faults are driver failures: Codex continues once, with the
// original prompt when no thread id is known.
func TestCodexMalformedStream(t *testing.T) {
	for _, tc := range []struct{ name, line string }{
		{"not json", `stream of consciousness`},
		{"no type", `{"thread_id":"x"}`},
		{"item without type", `{"type":"item.completed","item":{"text":"x"}}`},
		{"no terminal event", `{"type":"turn.started"}`},
		{"error then completed", `{"type":"error","message":"x"}` + "\n" + `{"type":"turn.completed"}`},
		{"completed without message", `{"type":"turn.completed"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCLI(t, "codex")
			f.events(0, tc.line)
			f.events(1, tc.line)
			t.Setenv("CODEX_API_KEY", "k")
			b := harness.Binding{Model: "gpt-5.6", Env: []string{"CODEX_API_KEY"}}
			if s := f.exec(textStep(t), b, "openai", `{"text":"draft"}`, &recorder{}); s != wantCrash || f.turns() != 2 {
				t.Fatalf("outcome %s after %d processes", s, f.turns())
			}
			if !strings.HasPrefix(f.stdin(1), "Execute this graph node") || indexOf(f.argv(1), "resume") >= 0 {
				t.Fatalf("continuation without a thread is not a fresh prompt: %q", f.argv(1))
			}
		})
	}
}

func TestCodexNonZeroExitAfterCompletionIsCrash(t *testing.T) {
	f := newFakeCLI(t, "codex")
	for n := range 2 {
		f.events(n, codexTurn("th-1", `{"text":"better"}`)...)
		f.exit(n, 2)
	}
	t.Setenv("CODEX_API_KEY", "k")
	b := harness.Binding{Model: "gpt-5.6", Env: []string{"CODEX_API_KEY"}}
	if s := f.exec(textStep(t), b, "openai", `{"text":"draft"}`, &recorder{}); s != wantCrash {
		t.Fatalf("outcome %s", s)
	}
}

// Refused environments end the execution before any process starts.
func TestCodexEnvRefusals(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "https://elsewhere.example")
	t.Setenv("HOME_OVERRIDE", "x")
	t.Setenv("OTHER_KEY", "x")
	for _, env := range [][]string{{"OPENAI_BASE_URL", "OTHER_KEY"}, {"OTHER_KEY"}} {
		f := newFakeCLI(t, "codex")
		b := harness.Binding{Model: "gpt-5.6", Env: env}
		if s := f.exec(textStep(t), b, "openai", `{"text":"draft"}`, &recorder{}); s != wantCrash || f.turns() != 0 {
			t.Fatalf("env %v: outcome %s after %d processes", env, s, f.turns())
		}
	}
}

// A node_instance session resumes its thread on a revisit, with a full
// prompt, in the same home.
func TestCodexNodeInstanceResumes(t *testing.T) {
	f := newFakeCLI(t, "codex")
	f.events(0, codexTurn("th-1", `{"text":"better"}`)...)
	f.events(1, codexTurn("th-1", `{"text":"better"}`)...)
	t.Setenv("CODEX_API_KEY", "k")
	r := f.runner("CODEX_API_KEY")
	job := f.job(textStep(t), harness.Binding{Model: "gpt-5.6", SessionScope: harness.ScopeNodeInstance, Env: []string{"CODEX_API_KEY"}}, "openai")
	for i := range 2 {
		job.Execution = []string{"12", "13"}[i]
		if s := outcome(run(r, context.Background(), job, `{"text":"draft"}`, &recorder{})); s != wantVerified {
			t.Fatalf("execution %d: %s", i, s)
		}
	}
	argv := f.argv(1)
	if indexOf(argv, "resume") < 0 || argv[len(argv)-2] != "th-1" || !strings.Contains(f.stdin(1), "Authored instructions:") {
		t.Fatalf("revisit argv %q", argv)
	}
	home := filepath.Join(f.run, "writer-node-instance-7")
	if f.env(0)["HOME"] != home || f.env(1)["HOME"] != home {
		t.Fatalf("homes %s, %s", f.env(0)["HOME"], f.env(1)["HOME"])
	}
	if st, err := os.Stat(home); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("node instance home: %v", err)
	}
}

// The driver defaults to the harness name, and argv to that name on PATH.
func TestCodexFoundOnPath(t *testing.T) {
	f := newFakeCLI(t, "codex")
	f.events(0, codexTurn("th-1", `{"text":"better"}`)...)
	t.Setenv("PATH", filepath.Join(f.dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("CODEX_API_KEY", "k")
	c, err := harness.Parse("h.json", []byte(`{"codex":{"env":["CODEX_API_KEY"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Driver("codex")
	if err != nil {
		t.Fatal(err)
	}
	b := harness.Binding{Model: "gpt-5.6", Env: []string{"CODEX_API_KEY"}}
	if s := outcome(run(harness.NewRunner(d, 0), context.Background(), f.job(textStep(t), b, "openai"), `{"text":"draft"}`, &recorder{})); s != wantVerified {
		t.Fatalf("outcome %s", s)
	}
}
