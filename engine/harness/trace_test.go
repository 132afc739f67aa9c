package harness_test

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/tracing/tracingtest"
)

// attrs is a span's attributes as strings.
func attrs(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, a := range s.Attributes {
		m[string(a.Key)] = a.Value.Emit()
	}
	return m
}

// byName indexes spans by name (the last of each name).
func byName(spans tracetest.SpanStubs) map[string]tracetest.SpanStub {
	m := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		m[s.Name] = s
	}
	return m
}

// wantAttrs fails for each of want the span does not carry.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: %s = %q, want %q (all: %v)", s.Name, k, got[k], v, got)
		}
	}
}

// noArguments fails when a span carries what a tool was given or printed.
func noArguments(t *testing.T, spans tracetest.SpanStubs, secrets ...string) {
	t.Helper()
	for _, s := range spans {
		for k, v := range attrs(s) {
			for _, x := range secrets {
				if strings.Contains(v, x) {
					t.Errorf("span %q attribute %s holds %q", s.Name, k, x)
				}
			}
		}
	}
}

// A Codex turn is an invoke_agent span with the model and the usage the
// stream reported, its command and file change execute_tool spans under
// it, without their arguments or output.
func TestCodexTurnSpans(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-openai-secret")
	r := tracingtest.Start(t)
	f := newFakeCLI(t, "codex")
	f.fixtureTurn("codex-success.jsonl", harness.Binding{Model: "gpt-5.6", Env: []string{"OPENAI_API_KEY"}}, "openai")
	spans := r.Spans()
	named := byName(spans)
	turn, ok := named["invoke_agent write"]
	if !ok {
		t.Fatalf("no invoke_agent span in %v", spanNames(spans))
	}
	wantAttrs(t, turn, map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "openai",
		"gen_ai.request.model": "gpt-5.6", "gen_ai.agent.name": "write", "gen_ai.usage.input_tokens": "24763",
		"gen_ai.usage.cache_read.input_tokens": "24448", "gen_ai.usage.output_tokens": "122",
		"gen_ai.conversation.id": "0199a213-81c0-7800-8aa1-bbab2a035a53"})
	for _, tool := range []string{"shell", "apply_patch"} {
		s, ok := named["execute_tool "+tool]
		if !ok {
			t.Fatalf("no %s tool span in %v", tool, spanNames(spans))
		}
		wantAttrs(t, s, map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "oecp.tool.status": "completed"})
		if s.Parent.SpanID() != turn.SpanContext.SpanID() {
			t.Errorf("%s is not under the turn", s.Name)
		}
	}
	noArguments(t, spans, "cat notes.txt", "draft", "notes.txt", "sk-openai-secret")
}

// A Claude turn reports the model the CLI named, its cost, and a failed
// tool call with error.type.
func TestClaudeTurnSpans(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
	r := tracingtest.Start(t)
	f := newFakeCLI(t, "claude")
	sid := `,"session_id":"s-1"`
	f.events(0,
		`{"type":"system","subtype":"init","model":"claude-sonnet-5-20260101"`+sid+`}`,
		`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"rm -rf secret-dir"}}]}`+sid+`}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":"permission denied: secret-dir"}]}`+sid+`}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"{\"text\":\"better\"}"}}`+sid+`}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"{\"text\":\"better\"}","usage":{"input_tokens":10,"cache_read_input_tokens":30,"output_tokens":5},"total_cost_usd":0.25`+sid+`}`)
	f.mustVerify(harness.Binding{Model: "claude-sonnet-5", Env: []string{"ANTHROPIC_API_KEY"}}, "anthropic")
	spans := r.Spans()
	named := byName(spans)
	turn := named["invoke_agent write"]
	wantAttrs(t, turn, map[string]string{"gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-sonnet-5",
		"gen_ai.response.model": "claude-sonnet-5-20260101", "gen_ai.usage.input_tokens": "40", "gen_ai.usage.cache_read.input_tokens": "30",
		"gen_ai.usage.output_tokens": "5", "oecp.usage.cost_usd": "0.25", "gen_ai.conversation.id": "s-1"})
	tool, ok := named["execute_tool Bash"]
	if !ok || tool.Parent.SpanID() != turn.SpanContext.SpanID() {
		t.Fatalf("no Bash tool span under the turn in %v", spanNames(spans))
	}
	wantAttrs(t, tool, map[string]string{"gen_ai.tool.call.id": "toolu_1", "error.type": "tool_error", "oecp.tool.status": "failed"})
	noArguments(t, spans, "secret-dir", "rm -rf", "sk-ant-secret")
}

// A turn that fails carries error.type with the outcome code it ends the
// execution with.
func TestFailedTurnSpanCarriesTheOutcomeCode(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-openai-secret")
	r := tracingtest.Start(t)
	f := newFakeCLI(t, "codex")
	f.events(0, `{"type":"thread.started","thread_id":"th-1"}`, `{"type":"turn.failed","error":{"message":"model overloaded"}}`)
	f.events(1, `{"type":"thread.started","thread_id":"th-1"}`, `{"type":"turn.failed","error":{"message":"model overloaded"}}`)
	rec := &recorder{}
	f.exec(textStep(t), harness.Binding{Model: "gpt-5.6", Env: []string{"OPENAI_API_KEY"}}, "openai", `{"text":"draft"}`, rec)
	turn := byName(r.Spans())["invoke_agent write"]
	wantAttrs(t, turn, map[string]string{"error.type": "crash"})
}

func spanNames(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}
