package harness_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/oecp/oecp/engine/harness"
)

// Claude Code repeats a tool's output in one event (a line of hundreds of
// KB) and streams a text delta per event: neither is a limit.
func TestClaudeLongLinesAndManyEvents(t *testing.T) {
	f := newFakeCLI(t, "claude")
	sid := `,"session_id":"s-1"`
	lines := []string{`{"type":"system","subtype":"init"` + sid + `}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":` + quote(strings.Repeat("x", 300<<10)) + `}]}` + sid + `}`}
	for range 6000 {
		lines = append(lines, `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" "}}`+sid+`}`)
	}
	lines = append(lines, claudeTurn("s-1", `{"text":"better"}`)[2])
	f.events(0, lines...)
	f.mustVerify(harness.Binding{Model: "claude-sonnet-5"}, "anthropic")
}

// Codex's top-level error events report retries it recovers from: system
// lines, not failures.
func TestCodexErrorEventsAreNotFailures(t *testing.T) {
	f := newFakeCLI(t, "codex")
	turn := codexTurn("th-1", `{"text":"better"}`)
	f.events(0, append([]string{turn[0], `{"type":"error","message":"Reconnecting... 2/5 (unexpected status 500)"}`,
		`{"type":"item.completed","item":{"id":"i","type":"error","message":"Falling back from WebSockets to HTTPS transport."}}`}, turn[1:]...)...)
	t.Setenv("CODEX_API_KEY", "sk-codex-test-key")
	rec := f.fixtureless(harness.Binding{Model: "gpt-5.6", Env: []string{"CODEX_API_KEY"}}, "openai")
	if !rec.has("warn: retrying: Codex: Reconnecting... 2/5 (unexpected status 500)") || rec.contains("provider failure") {
		t.Fatalf("lines:\n%s", rec.text())
	}
}

// TestCLIRetriesAreRetryNotices: each CLI's report of a retry it makes on
// its own (Codex's "Reconnecting... n/5" error events and its fallback
// error items, Claude's api_retry events) is a warn record that begins
// with harness.RetryRecordPrefix and names the CLI, so that a watch can
// show it as it happens; another Codex error event is not.
func TestCLIRetriesAreRetryNotices(t *testing.T) {
	t.Setenv("CODEX_API_KEY", "sk-codex-test-key")
	codex := newFakeCLI(t, "codex")
	turn := codexTurn("th-1", `{"text":"better"}`)
	codex.events(0, append([]string{turn[0], `{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion)"}`,
		`{"type":"item.completed","item":{"id":"e","type":"error","message":"Falling back from WebSockets to HTTPS transport."}}`,
		`{"type":"error","message":"model overloaded"}`}, turn[1:]...)...)
	rec := codex.fixtureless(harness.Binding{Model: "gpt-5.6", Env: []string{"CODEX_API_KEY"}}, "openai")
	for _, want := range []string{
		"warn: " + harness.RetryRecordPrefix + "Codex: Reconnecting... 1/5 (stream disconnected before completion)",
		"warn: " + harness.RetryRecordPrefix + "Codex: Falling back from WebSockets to HTTPS transport.",
		"debug: provider error: model overloaded",
	} {
		if !rec.has(want) {
			t.Errorf("no line %q:\n%s", want, rec.text())
		}
	}
	claude := newFakeCLI(t, "claude")
	ct := claudeTurn("s-1", `{"text":"better"}`)
	claude.events(0, ct[0], `{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"error_status":529,"error":"overloaded","session_id":"s-1"}`, ct[1], ct[2])
	rec = claude.fixtureless(harness.Binding{Model: "claude-sonnet-5"}, "anthropic")
	if want := "warn: " + harness.RetryRecordPrefix + "Claude: API retry 2 of 10: overloaded (HTTP 529)"; !rec.has(want) {
		t.Errorf("no line %q:\n%s", want, rec.text())
	}
}

// A failed turn names turn.failed's cause, not the retries before it.
func TestCodexTurnFailedNamesCause(t *testing.T) {
	f := newFakeCLI(t, "codex")
	for n := range 2 {
		f.events(n, `{"type":"thread.started","thread_id":"th-1"}`, `{"type":"error","message":"Reconnecting... 5/5 (stream disconnected)"}`,
			`{"type":"turn.failed","error":{"message":"quota exhausted for this key"}}`)
		f.exit(n, 1)
	}
	t.Setenv("CODEX_API_KEY", "sk-codex-test-key")
	rec := &recorder{}
	if s := f.exec(textStep(t), harness.Binding{Model: "gpt-5.6", Env: []string{"CODEX_API_KEY"}}, "openai", `{"text":"draft"}`, rec); s != wantCrash {
		t.Fatalf("outcome %s", s)
	}
	if !rec.has("error: Codex provider failure: quota exhausted for this key") || rec.contains("failure: Reconnecting") {
		t.Fatalf("lines:\n%s", rec.text())
	}
}

// A 401 or 403 report ends the process at once (it would retry for
// minutes) as refusal/authentication_required, without a continuation.
func TestProviderAuthStopsCLI(t *testing.T) {
	for _, tc := range []struct{ cli, event string }{
		{"codex", `{"type":"error","message":"Reconnecting... 2/5 (unexpected status 401 Unauthorized: bad key)"}`},
		{"claude", `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"error_status":403,"error":"forbidden","session_id":"s-1"}`},
	} {
		t.Run(tc.cli, func(t *testing.T) {
			f := newFakeCLI(t, tc.cli)
			f.action(0, "echo "+shellQuote(tc.event)+"; exec sleep 600")
			t.Setenv("CODEX_API_KEY", "sk-codex-test-key")
			b := harness.Binding{Model: "m", Env: []string{"CODEX_API_KEY"}}
			rec := &recorder{}
			if s := f.exec(textStep(t), b, "openai", `{"text":"draft"}`, rec); s != wantAuthFail || f.turns() != 1 {
				t.Fatalf("outcome %s after %d processes\n%s", s, f.turns(), rec.text())
			}
		})
	}
}

// fixtureless runs textStep once on the prepared events and requires the
// verified outcome.
func (f *fakeCLI) fixtureless(b harness.Binding, provider string) *recorder {
	f.t.Helper()
	rec := &recorder{}
	if s := f.exec(textStep(f.t), b, provider, `{"text":"draft"}`, rec); s != wantVerified {
		f.t.Fatalf("outcome %s\n%s", s, rec.text())
	}
	return rec
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Reported cost counts against the run's budget: the turn that passes it
// ends the execution as refusal/policy_denied, and so does every later
// execution of the run, until the run is closed.
func TestBudgetEndsRunOverCost(t *testing.T) {
	f := newFakeCLI(t, "claude")
	result := func(answer string) string {
		return `{"type":"result","subtype":"success","is_error":false,"result":` + quote(answer) +
			`,"session_id":"s-1","total_cost_usd":0.3,"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":2}}`
	}
	f.events(0, `{"type":"system","subtype":"init","session_id":"s-1"}`, result(`{"text":7}`))
	f.events(1, `{"type":"system","subtype":"init","session_id":"s-1"}`, result(`{"text":"better"}`))
	b, _ := json.Marshal(map[string]any{"claude": map[string]any{"argv": []string{filepath.Join(f.dir, "bin", "claude")}}})
	cfg, err := harness.Parse("harness.json", b)
	if err != nil {
		t.Fatal(err)
	}
	tally := &usageTally{}
	cfg.SetAccounting(tally, 0.5)
	r, err := cfg.Runner("claude")
	if err != nil {
		t.Fatal(err)
	}
	job := f.job(textStep(t), harness.Binding{Model: "claude-sonnet-5"}, "anthropic")
	rec := &recorder{}
	if s := outcome(run(r, context.Background(), job, `{"text":"draft"}`, rec)); s != wantPolicyOff || f.turns() != 2 {
		t.Fatalf("outcome %s after %d turns\n%s", s, f.turns(), rec.text())
	}
	if u := tally.sum(); u.Input != 30 || u.CachedInput != 10 || u.Output != 4 || u.CostUSD != 0.6 {
		t.Fatalf("usage %+v", u)
	}
	if !rec.has("info: usage: input 15 tokens (5 cached), output 2 (0 reasoning), cost 0.300000 USD") ||
		!rec.has("error: agent budget exceeded: the run's agents reported 0.600000 USD, over the --max-agent-usd-per-run budget of 0.500000 USD") {
		t.Fatalf("lines:\n%s", rec.text())
	}
	if s := outcome(run(r, context.Background(), job, `{"text":"draft"}`, &recorder{})); s != wantPolicyOff || f.turns() != 2 {
		t.Fatalf("a later execution: %s after %d turns", s, f.turns())
	}
	r.CloseRun("run-1")
	f.events(2, claudeTurn("s-2", `{"text":"better"}`)...)
	if s := outcome(run(r, context.Background(), job, `{"text":"draft"}`, &recorder{})); s != wantVerified {
		t.Fatalf("after the run closed: %s", s)
	}
}

// baseUrl reaches each CLI the way it honours it: Codex as a --config
// override after resume (openai_base_url, or the OpenRouter provider's
// base_url), Claude Code as ANTHROPIC_BASE_URL.
func TestBaseURLPassed(t *testing.T) {
	t.Setenv("CODEX_API_KEY", "sk-codex-test-key")
	t.Setenv("OPENROUTER_API_KEY", "sk-or-test-key")
	for _, tc := range []struct{ cli, provider, env, want string }{
		{"codex", "openai", "CODEX_API_KEY", `--config openai_base_url="http://127.0.0.1:4000/v1"`},
		{"codex", "openrouter", "OPENROUTER_API_KEY", `--config model_providers.openrouter.base_url="http://127.0.0.1:4000/v1"`},
		{"claude", "anthropic", "", "ANTHROPIC_BASE_URL=http://127.0.0.1:4000/v1"},
	} {
		t.Run(tc.cli+"/"+tc.provider, func(t *testing.T) {
			f := newFakeCLI(t, tc.cli)
			if tc.cli == "codex" {
				f.events(0, codexTurn("th-1", `{"text":"better"}`)...)
			} else {
				f.events(0, claudeTurn("s-1", `{"text":"better"}`)...)
			}
			var env []string
			if tc.env != "" {
				env = []string{tc.env}
			}
			b, _ := json.Marshal(map[string]any{tc.cli: map[string]any{"argv": []string{filepath.Join(f.dir, "bin", tc.cli)}, "env": env, "baseUrl": "http://127.0.0.1:4000/v1"}})
			cfg, err := harness.Parse("harness.json", b)
			if err != nil {
				t.Fatal(err)
			}
			r, err := cfg.Runner(tc.cli)
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			if s := outcome(run(r, context.Background(), f.job(textStep(t), harness.Binding{Model: "m", Env: env}, tc.provider), `{"text":"draft"}`, rec)); s != wantVerified {
				t.Fatalf("outcome %s\n%s", s, rec.text())
			}
			got := strings.Join(f.argv(0), " ")
			if tc.cli == "claude" {
				e := f.env(0)
				got = "ANTHROPIC_BASE_URL=" + e["ANTHROPIC_BASE_URL"]
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("%s lacks %s", got, tc.want)
			}
		})
	}
}

// keptSpending is a run's Spending as its record in a shared ledger keeps
// it: every runner of the run reads and adds to the same sum.
type keptSpending struct {
	mu    sync.Mutex
	spent float64
}

func (k *keptSpending) Spent(context.Context) (float64, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.spent, nil
}

func (k *keptSpending) AddSpent(_ context.Context, usd float64) (float64, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.spent += usd
	return k.spent, nil
}

// TestBudgetContinuesOnAnotherServer: a run's spending is kept with the
// run (Job.Spending), so the runner of the server that took the run over
// counts from what the first one's turns reported: its turn that passes
// the budget ends as refusal/policy_denied, and so does its next
// execution, before any turn.
func TestBudgetContinuesOnAnotherServer(t *testing.T) {
	f := newFakeCLI(t, "claude")
	result := func(answer string) string {
		return `{"type":"result","subtype":"success","is_error":false,"result":` + quote(answer) +
			`,"session_id":"s-1","total_cost_usd":0.3,"usage":{"input_tokens":10,"output_tokens":2}}`
	}
	f.events(0, `{"type":"system","subtype":"init","session_id":"s-1"}`, result(`{"text":"one"}`))
	f.events(1, `{"type":"system","subtype":"init","session_id":"s-1"}`, result(`{"text":"two"}`))
	b, _ := json.Marshal(map[string]any{"claude": map[string]any{"argv": []string{filepath.Join(f.dir, "bin", "claude")}}})
	runnerOf := func() *harness.Runner {
		cfg, err := harness.Parse("harness.json", b)
		if err != nil {
			t.Fatal(err)
		}
		cfg.SetAccounting(nil, 0.5)
		r, err := cfg.Runner("claude")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	kept := &keptSpending{}
	job := f.job(textStep(t), harness.Binding{Model: "claude-sonnet-5"}, "anthropic")
	job.Spending = kept
	rec := &recorder{}
	if s := outcome(run(runnerOf(), context.Background(), job, `{"text":"draft"}`, rec)); !strings.HasPrefix(s, `{"status":"verified"`) {
		t.Fatalf("first server: %s\n%s", s, rec.text())
	}
	taker := runnerOf() // a server with nothing of the run in memory
	rec = &recorder{}
	if s := outcome(run(taker, context.Background(), job, `{"text":"draft"}`, rec)); s != wantPolicyOff || f.turns() != 2 {
		t.Fatalf("server that took the run over: %s after %d turns\n%s", s, f.turns(), rec.text())
	}
	if !rec.has("error: agent budget exceeded: the run's agents reported 0.600000 USD, over the --max-agent-usd-per-run budget of 0.500000 USD") {
		t.Fatalf("lines:\n%s", rec.text())
	}
	if s := outcome(run(runnerOf(), context.Background(), job, `{"text":"draft"}`, &recorder{})); s != wantPolicyOff || f.turns() != 2 {
		t.Fatalf("a later execution on a third server: %s after %d turns", s, f.turns())
	}
	if kept.spent != 0.6 {
		t.Fatalf("kept spending %v, want 0.6", kept.spent)
	}
}
