package harness_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/graph"
)

func TestContractJSON(t *testing.T) {
	c, instructions, err := harness.ContractFor(textStep(t))
	if err != nil || instructions != "Rewrite the text." {
		t.Fatal(instructions, err)
	}
	if got := string(c.JSON()); got != `{"kind":"worker","output":{"kind":"record","fields":{"text":{"type":{"kind":"string"},"required":true}}}}` {
		t.Fatalf("worker contract %s", got)
	}
	v := reviewVerifier(t)
	v.Signals["verdict"] = []string{"rejected", "approved"}
	c, _, err = harness.ContractFor(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"verifier","output":{"kind":"boolean"},"signals":{"verdict":["approved","rejected"]},"diagnostic":{"kind":"record","fields":{"message":{"type":{"kind":"string"},"required":true}}}}`
	if got := string(c.JSON()); got != want {
		t.Fatalf("verifier contract %s", got)
	}
	if !json.Valid(c.JSON()) {
		t.Fatal("contract is not JSON")
	}
}

func TestContractForRefusals(t *testing.T) {
	step := textStep(t)
	step.Instructions = nil
	for _, n := range []graph.Node{step, &graph.Succeed{Name: "done"}, nil} {
		if _, _, err := harness.ContractFor(n); !errors.Is(err, harness.ErrNotAgentNode) {
			t.Errorf("%v: %v", n, err)
		}
	}
}

func TestRenderPrompt(t *testing.T) {
	c, instructions, _ := harness.ContractFor(textStep(t))
	p, err := harness.RenderPrompt(instructions, json.RawMessage("{ \"text\" :\n \"draft\" }"), c)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(p, "\n")
	want := []string{"Authored instructions:", "Rewrite the text.", "", "Input JSON:", `{"text":"draft"}`, "", "Runtime-owned response contract:", string(c.JSON())}
	if strings.Join(lines[2:10], "\n") != strings.Join(want, "\n") {
		t.Fatalf("prompt:\n%s", p)
	}
	if !strings.Contains(p, "bare JSON") || !strings.Contains(p, "literal null") {
		t.Fatalf("guidance missing:\n%s", p)
	}
	if _, err := harness.RenderPrompt(instructions, json.RawMessage("{"), c); err == nil {
		t.Fatal("bad input accepted")
	}
}

func TestValidateWorker(t *testing.T) {
	c, _, _ := harness.ContractFor(textStep(t))
	cases := []struct{ text, problem string }{
		{"```json\n{\"text\":\"x\"}\n```", "final response is not valid JSON: "},
		{`{"text":"x"} trailing`, "final response is not valid JSON: "},
		{`{"text":1}`, "output $.text must be a string"},
		{`{}`, "output $ is missing required field text"},
		{`{"text":"x","extra":1}`, "output $ contains undeclared field extra"},
	}
	for _, tc := range cases {
		_, err := c.Validate(tc.text)
		if err == nil || !strings.HasPrefix(err.Error(), tc.problem) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.problem)
		}
	}
	o, err := c.Validate("\n {\"text\":\"x\"}\n")
	if err != nil || outcome(o) != `{"status":"verified","output":{"text":"x"},"artifacts":[]}` {
		t.Fatalf("%v %s", err, outcome(o))
	}
	null := harness.Contract{Output: payload(t, `{"kind":"null"}`)}
	if _, err := null.Validate(`null`); err != nil {
		t.Fatal(err)
	}
}

func TestValidateVerifier(t *testing.T) {
	c, _, _ := harness.ContractFor(reviewVerifier(t))
	ok := `"output":true,"signals":{"verdict":"approved"},"diagnostic":{"message":"m"}`
	cases := []struct{ text, problem string }{
		{`[]`, "final response must be an object"},
		{`{` + ok + `,"extra":1}`, "final response contains undeclared field extra"},
		{`{"output":true,"signals":{"verdict":"approved"}}`, "final response is missing required field diagnostic"},
		{`{"output":1,"signals":{"verdict":"approved"},"diagnostic":{"message":"m"}}`, "output $ must be a boolean"},
		{`{"output":true,"signals":{"verdict":"approved"},"diagnostic":{}}`, "diagnostic $ is missing required field message"},
		{`{"output":true,"signals":{},"diagnostic":{"message":"m"}}`, "signals is missing required field verdict"},
		{`{"output":true,"signals":{"verdict":"approved","mood":"ok"},"diagnostic":{"message":"m"}}`, "signals contains undeclared field mood"},
		{`{"output":true,"signals":{"verdict":"maybe"},"diagnostic":{"message":"m"}}`, "signals.verdict contains undeclared label maybe"},
		{`{"output":true,"signals":{"verdict":1},"diagnostic":{"message":"m"}}`, "signals.verdict must be a label string"},
		{`{"output":true,"signals":null,"diagnostic":{"message":"m"}}`, "signals must be an object"},
	}
	for _, tc := range cases {
		_, err := c.Validate(tc.text)
		if err == nil || !strings.HasPrefix(err.Error(), tc.problem) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.problem)
		}
	}
	o, err := c.Validate(`{` + ok + `}`)
	if err != nil || outcome(o) != `{"status":"verifier","output":true,"signals":{"verdict":"approved"},"diagnostic":{"message":"m"},"artifacts":[]}` {
		t.Fatalf("%v %s", err, outcome(o))
	}
}

func TestRenderCorrectionBounded(t *testing.T) {
	open := harness.Contract{Output: payload(t, `{"kind":"record","fields":{"a":{"type":{"kind":"string"},"required":false}}}`)}
	_, err := open.Validate(`{"` + strings.Repeat("é", 9000) + `":1}`)
	if err == nil || len(err.Error()) > 8<<10 || len(err.Error()) < 8<<10-1 || !utf8.ValidString(err.Error()) || !strings.HasPrefix(err.Error(), "output $ contains undeclared field ") {
		t.Fatalf("problem of %d bytes: %.80v", len(err.Error()), err)
	}
	c, _, _ := harness.ContractFor(textStep(t))
	corr := harness.RenderCorrection("output $.text must be a string", c)
	if !strings.Contains(corr, "Validation error:\noutput $.text must be a string\n") || !strings.Contains(corr, string(c.JSON())) {
		t.Fatalf("correction:\n%s", corr)
	}
}
