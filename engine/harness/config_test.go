package harness_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/harness"
)

func TestParseConfig(t *testing.T) {
	c, err := harness.Parse("h.json", []byte(`{"claude":{"driver":"command","argv":["/bin/agent","--x"],"env":["ANTHROPIC_API_KEY"]},"codex":{"driver":"command","argv":["codex-wrap"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Names(), ","); got != "claude,codex" {
		t.Fatalf("names %s", got)
	}
	if _, err := c.Driver("codex"); err != nil {
		t.Fatal(err)
	}
}

// A baseUrl is taken as given: the Responses API base with its path for
// codex, the API root for claude.
func TestParseBaseURL(t *testing.T) {
	if _, err := harness.Parse("h.json", []byte(`{"codex":{"baseUrl":"http://127.0.0.1:4000/v1"},"claude":{"baseUrl":"https://gateway.example"}}`)); err != nil {
		t.Fatal(err)
	}
}

func TestParseConfigRefusals(t *testing.T) {
	cases := []struct{ file, want string }{
		{`[]`, "JSON object keyed by harness name"},
		{`null`, "JSON object keyed by harness name"},
		{`{"gemini":{"driver":"command","argv":["x"]}}`, `key "gemini": unknown harness`},
		{`{"claude":{"driver":"command","argv":["x"],"timeout":1}}`, `key "claude"`},
		{`{"claude":{"driver":"socket","argv":["x"]}}`, `key "claude": driver "socket"`},
		{`{"codex":{"driver":"claude"}}`, `key "codex": driver "claude": want "codex" or "command"`},
		{`{"codex":{"argv":[""]}}`, `key "codex": argv needs at least the program`},
		{`{"claude":{"driver":"command","argv":[]}}`, `key "claude": argv needs at least the program`},
		{`{"claude":{"driver":"command"}}`, `key "claude": argv needs at least the program`},
		{`{"claude":{"driver":"command","argv":["x"],"env":["BAD-NAME"]}}`, `key "claude": env "BAD-NAME"`},
		{`{"codex":{"baseUrl":"127.0.0.1:4000/v1"}}`, `key "codex": baseUrl "127.0.0.1:4000/v1": want an absolute http or https URL`},
		{`{"codex":{"baseUrl":"ftp://gateway/v1"}}`, `baseUrl "ftp://gateway/v1"`},
		{`{"claude":{"baseUrl":"https://user:pw@gateway"}}`, `without credentials`},
		{`{"claude":{"baseUrl":"https://gateway/?key=1"}}`, `without credentials, query or fragment`},
	}
	for _, tc := range cases {
		_, err := harness.Parse("h.json", []byte(tc.file))
		if err == nil || !errors.Is(err, harness.ErrInvalidConfig) || !strings.Contains(err.Error(), "h.json") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming h.json and %q", tc.file, err, tc.want)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "harness.json")
	if _, err := harness.Load(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"claude":{"driver":"command","argv":["a"],"env":["K"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := harness.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check("claude", map[string]harness.Binding{"write": {Model: "m", Env: []string{"K"}}}); err != nil {
		t.Fatal(err)
	}
}

func TestCheckMissingHarness(t *testing.T) {
	var none *harness.Config
	err := none.Check("claude", nil)
	if !errors.Is(err, harness.ErrNotConfigured) || !strings.Contains(err.Error(), "--harness") {
		t.Fatalf("no config: %v", err)
	}
	if _, err := none.Driver("claude"); !errors.Is(err, harness.ErrNotConfigured) {
		t.Fatalf("driver without config: %v", err)
	}
	c, err := harness.Parse("h.json", []byte(`{"codex":{"driver":"command","argv":["a"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Check("claude", nil)
	if !errors.Is(err, harness.ErrNotConfigured) || !strings.Contains(err.Error(), "--harness") || !strings.Contains(err.Error(), `"claude"`) {
		t.Fatalf("other harness: %v", err)
	}
}

func TestCheckEnvNotAllowed(t *testing.T) {
	c, err := harness.Parse("h.json", []byte(`{"claude":{"driver":"command","argv":["a"],"env":["ANTHROPIC_API_KEY"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	plan := map[string]harness.Binding{
		"review": {Model: "m", Env: []string{"ANTHROPIC_API_KEY"}},
		"write":  {Model: "m", Env: []string{"ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY"}},
	}
	err = c.Check("claude", plan)
	if !errors.Is(err, harness.ErrEnvNotAllowed) || !strings.Contains(err.Error(), `"write"`) || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Fatalf("error %v", err)
	}
	delete(plan, "write")
	if err := c.Check("claude", plan); err != nil {
		t.Fatal(err)
	}
}
