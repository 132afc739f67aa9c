package capsule_test

import (
	"strings"
	"testing"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/internal/agenttest"
)

// An agent line holding a declared value is redacted once on its way to
// the run's records, even for a value found inside the marker itself
// ("ACT" in "[REDACTED]"): the log record and the live stream's copy in
// the export read "key [REDACTED] done", never a marker garbled by a
// second pass over the first one's output.
func TestAgentLinesAreRedactedOnce(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "ACT")
	sid := `"session_id":"s-1"`
	turn := lines(
		`{"type":"system","subtype":"init",`+sid+`}`,
		`{"type":"assistant","message":{"content":[{"type":"text","text":"{\"summary\":\"edited\"}"}]},`+sid+`}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"{\"summary\":\"edited\"}","usage":{"input_tokens":3,"output_tokens":7},`+sid+`}`)
	cli, _, port := fakeCLI(t, "claude", fakeTurn{`printf 'improved\n' > NOTES.md; printf 'key %s done\n' "$ANTHROPIC_API_KEY" >&2`, turn})
	h := startFakeAgentHost(t, "claude", cli, port, capsule.Options{}, "ANTHROPIC_API_KEY")
	plan := `{"harness":"claude","provider":"anthropic","size":"small","nodes":{"write":{"kind":"agent","model":"claude-sonnet-5","env":["ANTHROPIC_API_KEY"]},"deliver":{"kind":"git_delivery"}}}`
	h.submit("once", agenttest.TwoNodes(t), "null", plan, h.remote.Head())
	if got := h.finish("once"); got != `{"status":"succeeded","output":null}` {
		t.Fatalf("terminal %s\n%s", got, h.logs("once"))
	}
	logs := h.logs("once")
	if !strings.Contains(logs, "key [REDACTED] done") || strings.Contains(logs, "[RED[") {
		t.Fatalf("the agent's line is not redacted exactly once:\n%s", logs)
	}
	p := parseTrace(t, export(t, h, local(), "once", "trace"))
	if got := string(p.out["0/stderr"]); got != "key [REDACTED] done\n" {
		t.Fatalf("the export's stderr %q", got)
	}
}
