package runs

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/worker"
)

// A declared variable's value an agent echoes into its output, its
// diagnostic (escaped or not), a log line or live output is recorded as
// [REDACTED]; a run that declares nothing, or nothing set, is untouched.
func TestRedactorRedactsEveryRecord(t *testing.T) {
	t.Setenv("OECP_TEST_KEY", `sk-"secret"-<1>`)
	t.Setenv("OECP_TEST_EMPTY", "")
	sub := &Submission{Runtime: RuntimePlan{Nodes: map[string]Binding{
		"a": {Kind: KindAgent, Env: []string{"OECP_TEST_KEY"}},
		"b": {Kind: KindAgent, Env: []string{"OECP_TEST_EMPTY", "OECP_TEST_UNSET"}},
	}}}
	r := newRecordRedactor(sub)
	esc, _ := json.Marshal(`key: sk-"secret"-<1>`)
	o := r.outcome(worker.Outcome{Status: "verifier",
		Output:     json.RawMessage(`{"text":` + string(esc) + `,"n":12345678901234567890,"list":["\u0073k-\"secret\"-<1>"]}`),
		Diagnostic: json.RawMessage(`{"message":"echo sk-\"secret\"-\u003c1\u003e"}`)})
	for _, raw := range []json.RawMessage{o.Output, o.Diagnostic} {
		if strings.Contains(string(raw), "secret") || !strings.Contains(string(raw), "[REDACTED]") || !json.Valid(raw) {
			t.Errorf("not redacted: %s", raw)
		}
	}
	if !strings.Contains(string(o.Output), "12345678901234567890") {
		t.Errorf("a number changed: %s", o.Output)
	}
	var logs []string
	s := r.sinks(worker.Sinks{Log: func(_, m string) { logs = append(logs, m) }, Output: func(m string) { logs = append(logs, m) }})
	s.Log("info", `the key is sk-"secret"-<1>`)
	s.Output(`sk-"secret"-<1>!`)
	if strings.Join(logs, "|") != "the key is [REDACTED]|[REDACTED]!" {
		t.Errorf("lines: %q", logs)
	}
	if newRecordRedactor(&Submission{Runtime: RuntimePlan{Nodes: map[string]Binding{"b": sub.Runtime.Nodes["b"]}}}) != nil {
		t.Error("a run without a set declared value needs no redactor")
	}
	var none *recordRedactor
	out := json.RawMessage(`{"x":1}`)
	if got := none.outcome(worker.Outcome{Output: out}); string(got.Output) != `{"x":1}` {
		t.Errorf("nil redactor changed %s", got.Output)
	}
}

// A declared value hex- or base64-encoded in an outcome's output or
// diagnostic is recorded as [REDACTED], also when the JSON escapes
// base64's '/' as \/ (which json.Marshal never writes).
func TestRedactorRedactsEncodedValuesInOutcomes(t *testing.T) {
	key := "sk-???~~~-0123456789" // standard base64 "c2stPz8/fn5+LTAxMjM0NTY3ODk="
	t.Setenv("OECP_TEST_KEY", key)
	r := newRecordRedactor(&Submission{Runtime: RuntimePlan{Nodes: map[string]Binding{"a": {Kind: KindAgent, Env: []string{"OECP_TEST_KEY"}}}}})
	b64 := base64.StdEncoding.EncodeToString([]byte(key))
	if !strings.Contains(b64, "/") {
		t.Fatalf("the test's key has no '/' in base64: %s", b64)
	}
	o := r.outcome(worker.Outcome{Status: "verifier",
		Output:     json.RawMessage(`{"b64":"` + strings.ReplaceAll(b64, "/", `\/`) + `","url":"` + base64.RawURLEncoding.EncodeToString([]byte(key)) + `"}`),
		Diagnostic: json.RawMessage(`{"hex":"` + strings.ToUpper(hex.EncodeToString([]byte(key))) + `"}`)})
	if got, want := string(o.Output), `{"b64":"[REDACTED]","url":"[REDACTED]"}`; got != want {
		t.Errorf("output %s, want %s", got, want)
	}
	if got, want := string(o.Diagnostic), `{"hex":"[REDACTED]"}`; got != want {
		t.Errorf("diagnostic %s, want %s", got, want)
	}
}
