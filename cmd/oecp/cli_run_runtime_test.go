package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/templates"
)

// templateGraph materialises a template.
func templateGraph(t *testing.T, name string, d templates.Delivery) *graph.GraphSpec {
	t.Helper()
	tpl, err := templates.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	g, err := tpl.Graph(d)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestBuildRuntimeBindsEveryNode: --harness builds a plan that binds each
// agent with its model (a node's own --model wins over its role's, which
// wins over the plain one, which wins over the harness's default), the
// harness's key variable and, inside the review loop, one session across
// rounds; the delivery node is git_delivery, without env.
func TestBuildRuntimeBindsEveryNode(t *testing.T) {
	g := templateGraph(t, templates.SoftwareChange, templates.DeliveryPR)
	raw, err := buildRuntime(g, "claude", []string{"claude-opus-5", "verifier=claude-haiku-4-5", "code=claude-fable-5"}, "standard", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"harness":"claude","provider":"anthropic","size":"standard","nodes":{` +
		`"acceptance":{"kind":"agent","model":"claude-haiku-4-5","sessionScope":"node_instance","env":["ANTHROPIC_API_KEY"]},` +
		`"code":{"kind":"agent","model":"claude-fable-5","sessionScope":"node_instance","env":["ANTHROPIC_API_KEY"]},` +
		`"deliver":{"kind":"git_delivery"},` +
		`"implement":{"kind":"agent","model":"claude-opus-5","env":["ANTHROPIC_API_KEY"]},` +
		`"repair":{"kind":"agent","model":"claude-opus-5","sessionScope":"node_instance","env":["ANTHROPIC_API_KEY"]}}}`
	if string(raw) != want {
		t.Fatalf("plan\n%s\nwant\n%s", raw, want)
	}
	raw, err = buildRuntime(templateGraph(t, templates.SingleWorker, templates.DeliveryNone), "codex", nil, "small", []string{})
	if err != nil || string(raw) != `{"harness":"codex","provider":"openai","size":"small","nodes":{"worker":{"kind":"agent","model":"gpt-5.6"}}}` {
		t.Fatalf("single-worker on codex without env: %s %v", raw, err)
	}
}

// TestBuildRuntimeRefuses: an unknown harness, size, or --model key, and
// an empty model, are refused with what is allowed.
func TestBuildRuntimeRefuses(t *testing.T) {
	g := templateGraph(t, templates.SoftwareChange, templates.DeliveryNone)
	for _, tc := range []struct {
		harness, size string
		models        []string
		want          string
	}{
		{"gemini", "small", nil, `--harness "gemini": want codex or claude`},
		{"codex", "huge", nil, `--size "huge": want tiny, small, standard, large`},
		{"codex", "small", []string{"reviewer=gpt-5.6"}, "(acceptance, code, implement, repair)"},
		{"codex", "small", []string{"code="}, `--model "code="`},
	} {
		if _, err := buildRuntime(g, tc.harness, tc.models, tc.size, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v", tc, err)
		}
	}
}

// TestAgentEnvFlag: --agent-env is the harness default when absent, no
// names for none, else the comma-separated names.
func TestAgentEnvFlag(t *testing.T) {
	for flag, want := range map[string]string{"": "null", "none": "[]", "A, B,,C": `["A","B","C"]`} {
		if got, _ := json.Marshal(agentEnv(flag)); string(got) != want {
			t.Errorf("--agent-env %q: %s, want %s", flag, got, want)
		}
	}
}

// TestTaskTitle: a run's default title is the task's first line with text,
// without heading marks or control characters, shortened.
func TestTaskTitle(t *testing.T) {
	for task, want := range map[string]string{
		"\n\n## Fix the\tparser  \nmore": "Fix the parser",
		"   \n#\n":                       "fallback",
		strings.Repeat("word ", 40):      strings.Repeat("word ", 15) + "word…",
	} {
		if got := taskTitle(task, "fallback"); got != want {
			t.Errorf("taskTitle(%q) = %q, want %q", task, got, want)
		}
	}
}
