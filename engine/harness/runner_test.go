package harness_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/engine/harness"
)

const (
	wantVerified  = `{"status":"verified","output":{"text":"better"},"artifacts":[]}`
	wantMalformed = `{"status":"error","code":"malformed","reason":"malformed_result"}`
	wantCrash     = `{"status":"error","code":"crash","reason":"declared_failure"}`
)

func TestFirstAnswerValid(t *testing.T) {
	f := newFake(t)
	f.answer(0, "s-1", `{"text":"better"}`)
	rec := &recorder{}
	b := harness.Binding{Model: "claude-sonnet-5", Effort: "max"}
	got := run(f.runner(), context.Background(), f.job(textStep(t), b), `{"text":"draft"}`, rec)
	if s := outcome(got); s != wantVerified {
		t.Fatalf("outcome %s", s)
	}
	c := f.call(0)
	if c.Session != nil || c.Node != "write" || c.Model != "claude-sonnet-5" || c.Effort == nil || *c.Effort != "max" {
		t.Fatalf("stdin %+v", c)
	}
	for _, part := range []string{"Authored instructions:\nRewrite the text.\n", "Input JSON:\n{\"text\":\"draft\"}\n", `Runtime-owned response contract:` + "\n" + `{"kind":"worker","output":{"kind":"record"`} {
		if !strings.Contains(c.Prompt, part) {
			t.Fatalf("prompt lacks %q:\n%s", part, c.Prompt)
		}
	}
	if f.turns() != 1 {
		t.Fatalf("%d turns", f.turns())
	}
	// stderr and the answer are streamed to the logs and live output.
	for _, line := range []string{"info: turn 0", "out: turn 0", `info: {"text":"better"}`, `out: {"text":"better"}`} {
		if !rec.has(line) {
			t.Fatalf("missing %q in\n%s", line, rec.text())
		}
	}
}

func TestCorrectedOnSecondTurnInSameSession(t *testing.T) {
	f := newFake(t)
	f.answer(0, "s-1", "```json\n{\"text\":\"better\"}\n```")
	f.answer(1, "s-1", `{"text":"better"}`)
	rec := &recorder{}
	got := run(f.runner(), context.Background(), f.job(textStep(t), harness.Binding{Model: "m"}), `{"text":"draft"}`, rec)
	if s := outcome(got); s != wantVerified {
		t.Fatalf("outcome %s", s)
	}
	first, second := f.call(0), f.call(1)
	if first.Effort != nil || first.Session != nil {
		t.Fatalf("first turn %+v", first)
	}
	if second.Session == nil || *second.Session != "s-1" {
		t.Fatalf("correction not in the same session: %+v", second)
	}
	for _, part := range []string{"Validation error:\nfinal response is not valid JSON", "Response contract:\n{\"kind\":\"worker\""} {
		if !strings.Contains(second.Prompt, part) {
			t.Fatalf("correction lacks %q:\n%s", part, second.Prompt)
		}
	}
	if strings.Contains(second.Prompt, "Rewrite the text.") || strings.Contains(second.Prompt, "draft") {
		t.Fatalf("correction repeats instructions or input:\n%s", second.Prompt)
	}
}

func TestMalformedAfterTwoCorrections(t *testing.T) {
	f := newFake(t)
	for n := 0; n < 4; n++ {
		f.answer(n, "s-1", `{"text":7}`)
	}
	rec := &recorder{}
	got := run(f.runner(), context.Background(), f.job(textStep(t), harness.Binding{Model: "m"}), `{"text":"draft"}`, rec)
	if s := outcome(got); s != wantMalformed {
		t.Fatalf("outcome %s", s)
	}
	if f.turns() != 1+harness.MaxCorrections {
		t.Fatalf("%d turns", f.turns())
	}
	for n := 1; n <= harness.MaxCorrections; n++ {
		c := f.call(n)
		if c.Session == nil || *c.Session != "s-1" || !strings.Contains(c.Prompt, "output $.text must be a string") {
			t.Fatalf("turn %d: %+v", n, c)
		}
	}
}

func TestVerifierAnswer(t *testing.T) {
	f := newFake(t)
	f.answer(0, "s-1", `{"output":true,"signals":{"verdict":"maybe"},"diagnostic":{"message":"ok"}}`)
	f.answer(1, "s-1", ` {"output":true,"signals":{"verdict":"approved"},"diagnostic":{"message":"ok"}} `)
	got := run(f.runner(), context.Background(), f.job(reviewVerifier(t), harness.Binding{Model: "m"}), `null`, &recorder{})
	want := `{"status":"verifier","output":true,"signals":{"verdict":"approved"},"diagnostic":{"message":"ok"},"artifacts":[]}`
	if s := outcome(got); s != want {
		t.Fatalf("outcome %s", s)
	}
	if p := f.call(1).Prompt; !strings.Contains(p, "signals.verdict contains undeclared label maybe") {
		t.Fatalf("correction:\n%s", p)
	}
}

func TestNonZeroExitIsCrash(t *testing.T) {
	f := newFake(t)
	f.answer(0, "s-1", `{"text":"better"}`)
	f.write("exits/0", "3\n")
	got := run(f.runner(), context.Background(), f.job(textStep(t), harness.Binding{Model: "m"}), `{"text":"draft"}`, &recorder{})
	if s := outcome(got); s != wantCrash {
		t.Fatalf("outcome %s", s)
	}
}

func TestMalformedStdoutIsCrash(t *testing.T) {
	f := newFake(t)
	f.write("answers/0", `{"text":"no session"}`)
	got := run(f.runner(), context.Background(), f.job(textStep(t), harness.Binding{Model: "m"}), `{"text":"draft"}`, &recorder{})
	if s := outcome(got); s != wantCrash {
		t.Fatalf("outcome %s", s)
	}
}

func TestDriverDeadlineIsCrash(t *testing.T) {
	f := newFake(t)
	f.write("agent.sh", "#!/bin/sh\nexec sleep 1000\n")
	d, err := f.config([]string{"/bin/sh", filepath.Join(f.dir, "agent.sh")}).Driver("claude")
	if err != nil {
		t.Fatal(err)
	}
	got := run(harness.NewRunner(d, time.Nanosecond), context.Background(), f.job(textStep(t), harness.Binding{Model: "m"}), `{"text":"draft"}`, &recorder{})
	if s := outcome(got); s != wantCrash {
		t.Fatalf("outcome %s", s)
	}
}

// envScript saves its environment, logs the declared key and answers.
const envScript = `#!/bin/sh
/usr/bin/env > "$(dirname "$0")/env.txt"
echo "key is $HARNESS_TEST_KEY" >&2
cat > /dev/null
printf '%s\n' '{"session":"s","text":"{\"text\":\"better\"}"}'
`

func TestOnlyDeclaredAllowedEnvReachesProcess(t *testing.T) {
	f := newFake(t)
	t.Setenv("HARNESS_TEST_KEY", "sk-secret-value")
	t.Setenv("HARNESS_TEST_ALLOWED_UNDECLARED", "x")
	t.Setenv("HARNESS_TEST_OTHER", "y")
	f.write("agent.sh", envScript)
	rec := &recorder{}
	r := f.runner("HARNESS_TEST_KEY", "HARNESS_TEST_ALLOWED_UNDECLARED")
	got := run(r, context.Background(), f.job(textStep(t), harness.Binding{Model: "m", Env: []string{"HARNESS_TEST_KEY"}}), `{"text":"draft"}`, rec)
	if s := outcome(got); s != wantVerified {
		t.Fatalf("outcome %s\n%s", s, rec.text())
	}
	data, err := os.ReadFile(filepath.Join(f.dir, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		name, _, _ := strings.Cut(l, "=")
		switch name {
		case "PWD", "SHLVL", "_", "OLDPWD":
		default:
			names = append(names, name)
		}
	}
	if strings.Join(names, ",") != "HARNESS_TEST_KEY" {
		t.Fatalf("process env names %v", names)
	}
	// The line reaches the sinks as the agent wrote it: the caller's
	// sinks redact (once: a second pass could garble the first's marker).
	if !rec.has("info: key is sk-secret-value") {
		t.Fatalf("the line was changed on its way to the sinks:\n%s", rec.text())
	}
}

func TestEnvRefusedAtDispatch(t *testing.T) {
	f := newFake(t)
	f.answer(0, "s", `{"text":"better"}`)
	t.Setenv("HARNESS_TEST_KEY", "v")
	job := f.job(textStep(t), harness.Binding{Model: "m", Env: []string{"HARNESS_TEST_KEY"}})
	// Not listed by the harness entry: refused before any process starts.
	got := run(f.runner(), context.Background(), job, `{"text":"draft"}`, &recorder{})
	if s := outcome(got); s != `{"status":"error","code":"refusal","reason":"policy_denied"}` {
		t.Fatalf("outcome %s", s)
	}
	// Listed but unset on the server.
	job.Binding.Env = []string{"HARNESS_TEST_UNSET_NAME"}
	got = run(f.runner("HARNESS_TEST_UNSET_NAME"), context.Background(), job, `{"text":"draft"}`, &recorder{})
	if s := outcome(got); s != `{"status":"error","code":"refusal","reason":"authentication_required"}` {
		t.Fatalf("outcome %s", s)
	}
	if f.turns() != 0 {
		t.Fatalf("%d turns ran", f.turns())
	}
}

func TestNodeInstanceSessionReused(t *testing.T) {
	f := newFake(t)
	f.answer(0, "s-1", `{"text":"better"}`)
	f.answer(1, "s-1", `{"text":"better"}`)
	f.answer(2, "s-2", `{"text":"better"}`)
	r := f.runner()
	job := f.job(textStep(t), harness.Binding{Model: "m", SessionScope: harness.ScopeNodeInstance})
	for i := 0; i < 2; i++ {
		if s := outcome(run(r, context.Background(), job, `{"text":"draft"}`, &recorder{})); s != wantVerified {
			t.Fatalf("execution %d: %s", i, s)
		}
	}
	if c := f.call(1); c.Session == nil || *c.Session != "s-1" || !strings.Contains(c.Prompt, "Authored instructions:") {
		t.Fatalf("revisit did not resume with a full prompt: %+v", c)
	}
	// Another node instance of the same run starts its own session.
	other := job
	other.Instance = "ni-2"
	if s := outcome(run(r, context.Background(), other, `{"text":"draft"}`, &recorder{})); s != wantVerified {
		t.Fatalf("other instance: %s", s)
	}
	if c := f.call(2); c.Session != nil {
		t.Fatalf("other instance resumed %q", *c.Session)
	}
}

func TestNodeInstanceSessionLostAfterUncleanEnd(t *testing.T) {
	f := newFake(t)
	f.answer(0, "s-1", `{"text":"better"}`)
	f.write("exits/0", "1\n")
	r := f.runner()
	job := f.job(textStep(t), harness.Binding{Model: "m", SessionScope: harness.ScopeNodeInstance})
	if s := outcome(run(r, context.Background(), job, `{"text":"draft"}`, &recorder{})); s != wantCrash {
		t.Fatalf("first: %s", s)
	}
	f.answer(1, "s-1", `{"text":"better"}`)
	if s := outcome(run(r, context.Background(), job, `{"text":"draft"}`, &recorder{})); s != wantCrash {
		t.Fatalf("after loss: %s", s)
	}
	if f.turns() != 1 {
		t.Fatalf("a lost session ran %d turns", f.turns()-1)
	}
}

func TestSessionChangeOnResumeIsCrash(t *testing.T) {
	f := newFake(t)
	f.answer(0, "s-1", `not json`)
	f.answer(1, "s-other", `{"text":"better"}`)
	got := run(f.runner(), context.Background(), f.job(textStep(t), harness.Binding{Model: "m"}), `{"text":"draft"}`, &recorder{})
	if s := outcome(got); s != wantCrash {
		t.Fatalf("outcome %s", s)
	}
}

func TestNodeWithoutInstructionsIsCrash(t *testing.T) {
	f := newFake(t)
	step := textStep(t)
	step.Instructions = nil
	if s := outcome(run(f.runner(), context.Background(), f.job(step, harness.Binding{Model: "m"}), `{"text":"draft"}`, &recorder{})); s != wantCrash {
		t.Fatalf("outcome %s", s)
	}
	if f.turns() != 0 {
		t.Fatal("a turn ran")
	}
}

// The example harness answers from its prompt without any model.
func TestExampleEchoAgent(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("examples/harness/echo-agent.sh needs jq")
	}
	script, err := filepath.Abs("../../examples/harness/echo-agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t)
	d, err := f.config([]string{"/bin/sh", script}).Driver("claude")
	if err != nil {
		t.Fatal(err)
	}
	r := harness.NewRunner(d, 0)
	step := textStep(t)
	*step.Instructions = "Input JSON:\nnot the header"
	rec := &recorder{}
	got := run(r, context.Background(), f.job(step, harness.Binding{Model: "m"}), `{"text":"better"}`, rec)
	if s := outcome(got); s != wantVerified || !rec.has("info: echo-agent: answering without a model") {
		t.Fatalf("step: %s\n%s", s, rec.text())
	}
	v := reviewVerifier(t)
	v.Output = payload(t, `{"kind":"null"}`)
	v.Diagnostic = payload(t, `{"kind":"null"}`)
	got = run(r, context.Background(), f.job(v, harness.Binding{Model: "m"}), `null`, &recorder{})
	if s := outcome(got); s != `{"status":"verifier","output":null,"signals":{"verdict":"approved"},"diagnostic":null,"artifacts":[]}` {
		t.Fatalf("verifier: %s", s)
	}
}
