package harness

import (
	"context"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/oecp/oecp/engine/harness/agentstream"
	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/tracing"
)

// The harness's spans, under the execution's: one per agent turn
// (OpenTelemetry's GenAI invoke_agent, with the model and what the CLI
// reported it consumed), one per tool call the CLI's stream reports
// (execute_tool: the tool's name and how it ended, never its arguments or
// its output), and the sandbox's start. Free while tracing is off.

// traceTurn starts the span of turn number n of the conversation.
func (v *conversation) traceTurn(ctx context.Context, n int) (context.Context, tracing.Span) {
	if !tracing.Enabled() {
		return ctx, nil
	}
	return tracing.Start(ctx, tracing.OperationInvokeAgent+" "+v.ex.Node, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		tracing.KeyGenAIOperation.String(tracing.OperationInvokeAgent), tracing.KeyGenAIProvider.String(v.job.Provider),
		tracing.KeyHarness.String(v.r.harness), tracing.KeyGenAIAgentName.String(v.ex.Node),
		tracing.KeyGenAIRequestModel.String(v.job.Binding.Model), tracing.KeyTurn.Int(n)))
}

// endTurn ends a turn's span with the reply's session, model and usage;
// a failed turn carries error.type = the outcome code it would end the
// execution with.
func (v *conversation) endTurn(ctx context.Context, span tracing.Span, reply Reply, err error) {
	if span == nil {
		return
	}
	u := reply.Usage
	span.SetAttributes(tracing.KeyGenAIInputTokens.Int64(u.Input), tracing.KeyGenAIOutputTokens.Int64(u.Output))
	if u.CachedInput > 0 {
		span.SetAttributes(tracing.KeyGenAICachedTokens.Int64(u.CachedInput))
	}
	if u.Reasoning > 0 {
		span.SetAttributes(tracing.KeyGenAIReasoning.Int64(u.Reasoning))
	}
	if u.CostUSD > 0 {
		span.SetAttributes(tracing.KeyCostUSD.Float64(u.CostUSD))
	}
	if reply.Session != "" {
		span.SetAttributes(tracing.KeyGenAIConversation.String(reply.Session))
	}
	if reply.Model != "" {
		span.SetAttributes(tracing.KeyGenAIResponseModel.String(reply.Model))
	}
	if err != nil {
		code := v.r.failure(ctx, ctx, err).Code
		tracing.Fail(span, code, "agent turn failed: "+code)
	}
	span.End()
}

// confineTraced starts the execution's sandbox, in a span when there is
// a sandbox.
func (r *Runner) confineTraced(ctx context.Context, job Job, home string, verifier bool) (*sandbox.Execution, error) {
	if r.sandbox == nil || !tracing.Enabled() {
		return r.confine(job, home, verifier)
	}
	_, span := tracing.Start(ctx, "sandbox start", trace.WithAttributes(tracing.KeyNodeKind.String(map[bool]string{true: "verifier", false: "step"}[verifier])))
	exe, err := r.confine(job, home, verifier)
	if err != nil {
		tracing.Fail(span, "sandbox_unavailable", "the sandbox did not start")
	}
	span.End()
	return exe, err
}

// toolSpans are the open tool-call spans of one CLI process, by the call
// id its stream gives. A nil *toolSpans (tracing off) does nothing.
type toolSpans struct {
	ctx  context.Context
	open map[string]tracing.Span
}

func newToolSpans(ctx context.Context) *toolSpans {
	if !tracing.Enabled() || !trace.SpanFromContext(ctx).IsRecording() {
		return nil
	}
	return &toolSpans{ctx: ctx, open: map[string]tracing.Span{}}
}

// start opens the span of call id of tool name; typ is GenAI's tool type
// (function: the CLI's own tools; extension: an MCP server's).
func (t *toolSpans) start(id, name, typ string) {
	if t == nil {
		return
	}
	if _, ok := t.open[id]; ok {
		return
	}
	_, span := tracing.Start(t.ctx, tracing.OperationExecuteTool+" "+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		tracing.KeyGenAIOperation.String(tracing.OperationExecuteTool), tracing.KeyGenAIToolName.String(name),
		tracing.KeyGenAIToolCallID.String(id), tracing.KeyGenAIToolType.String(typ)))
	t.open[id] = span
}

// end closes call id with its status (the CLI's word: completed, failed,
// declined, …); failed marks it an error (error.type tool_error).
func (t *toolSpans) end(id, name, typ, status string, failed bool) {
	if t == nil {
		return
	}
	t.start(id, name, typ) // a call reported only when it ended
	span := t.open[id]
	delete(t.open, id)
	if status != "" {
		span.SetAttributes(tracing.KeyToolStatus.String(status))
	}
	if failed {
		tracing.Fail(span, "tool_error", "the tool call failed")
	}
	span.End()
}

// close ends the calls the stream never reported ended (error.type
// unfinished).
func (t *toolSpans) close() {
	if t == nil {
		return
	}
	for id, span := range t.open {
		tracing.Fail(span, "unfinished", "the stream ended before the tool call")
		span.End()
		delete(t.open, id)
	}
}

// codexTool is the tool name and type of a Codex item, "" for an item
// that is no tool call (a message, reasoning, a to-do list, an error).
func codexTool(kind, server, tool string) (name, typ string) {
	switch kind {
	case "command_execution":
		return "shell", "function"
	case "file_change":
		return "apply_patch", "function"
	case "web_search":
		return "web_search", "function"
	case "mcp_tool_call":
		return server + "/" + tool, "extension"
	}
	return "", ""
}

// codexToolFailed says whether a completed Codex tool item failed: its
// status is not completed, its command exited non-zero, or it carries an
// error.
func codexToolFailed(status string, exit []byte, hasError bool) bool {
	if hasError || (status != "" && status != "completed") {
		return true
	}
	if len(exit) == 0 || string(exit) == "null" {
		return false
	}
	n, err := strconv.Atoi(string(exit))
	return err != nil || n != 0
}

// toolResults ends the tool calls a Claude user message answers
// (tool_result blocks; is_error marks a failed call).
func (s *claudeStream) toolResults(results []agentstream.ClaudeToolResult) {
	if s.tools == nil {
		return
	}
	for _, r := range results {
		status := "completed"
		if r.IsError {
			status = "failed"
		}
		s.tools.end(r.ID, "", "function", status, r.IsError)
	}
}

// claudeToolType is GenAI's tool type of a Claude Code tool: extension
// for an MCP server's (mcp__server__tool), function for its own.
func claudeToolType(name string) string {
	if strings.HasPrefix(name, "mcp__") {
		return "extension"
	}
	return "function"
}

// codexToolItem opens or ends the span of a Codex item that is a tool
// call.
func (s *codexStream) codexToolItem(event string, item agentstream.CodexItem) {
	name, typ := codexTool(item.Type, item.Server, item.Tool)
	if name == "" || s.tools == nil {
		return
	}
	switch event {
	case agentstream.CodexItemStarted:
		s.tools.start(item.ID, name, typ)
	case agentstream.CodexItemCompleted:
		s.tools.end(item.ID, name, typ, item.Status, codexToolFailed(item.Status, item.ExitCode, item.Error != ""))
	}
}
