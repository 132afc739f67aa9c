package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Span is an OpenTelemetry span; while tracing is off every span is a
// no-op.
type Span = trace.Span

// noSpan is the span of a Start while tracing is off.
var noSpan trace.Span = noop.Span{}

// Start starts a span named name as a child of the span in ctx. While
// tracing is off it returns ctx itself and a no-op span, allocating
// nothing (options the caller builds still cost it: guard them with
// Enabled on a hot path).
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, Span) {
	s := current.Load()
	if s == nil {
		return ctx, noSpan
	}
	return s.tracer.Start(ctx, name, opts...)
}

// Attribute keys this project sets beyond OpenTelemetry's conventions,
// and the conventional ones it uses (the GenAI, RPC and error ones).
const (
	KeyErrorType = attribute.Key("error.type")

	KeyRunID       = attribute.Key("oecp.run.id")
	KeyRunStatus   = attribute.Key("oecp.run.status")
	KeyRunReason   = attribute.Key("oecp.run.reason")
	KeyNode        = attribute.Key("oecp.node")
	KeyNodeKind    = attribute.Key("oecp.node.kind")
	KeyExecution   = attribute.Key("oecp.execution")
	KeyAttempt     = attribute.Key("oecp.execution.attempt")
	KeyWorker      = attribute.Key("oecp.worker")
	KeyOutcome     = attribute.Key("oecp.outcome")
	KeyHarness     = attribute.Key("oecp.harness")
	KeyTurn        = attribute.Key("oecp.agent.turn")
	KeyCostUSD     = attribute.Key("oecp.usage.cost_usd")
	KeyToolStatus  = attribute.Key("oecp.tool.status")
	KeyRepository  = attribute.Key("oecp.repository")
	KeyRunResumed  = attribute.Key("oecp.run.resumed")
	KeyRPCSystem   = attribute.Key("rpc.system")
	KeyRPCSysName  = attribute.Key("rpc.system.name")
	KeyRPCMethod   = attribute.Key("rpc.method")
	KeyJSONRPCCode = attribute.Key("rpc.jsonrpc.error_code")
	KeyRPCStatus   = attribute.Key("rpc.response.status_code")

	KeyGenAIOperation     = attribute.Key("gen_ai.operation.name")
	KeyGenAIProvider      = attribute.Key("gen_ai.provider.name")
	KeyGenAIAgentName     = attribute.Key("gen_ai.agent.name")
	KeyGenAIRequestModel  = attribute.Key("gen_ai.request.model")
	KeyGenAIResponseModel = attribute.Key("gen_ai.response.model")
	KeyGenAIConversation  = attribute.Key("gen_ai.conversation.id")
	KeyGenAIInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	KeyGenAIOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	KeyGenAICachedTokens  = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	KeyGenAIReasoning     = attribute.Key("gen_ai.usage.reasoning.output_tokens")
	KeyGenAIToolName      = attribute.Key("gen_ai.tool.name")
	KeyGenAIToolCallID    = attribute.Key("gen_ai.tool.call.id")
	KeyGenAIToolType      = attribute.Key("gen_ai.tool.type")
	OperationInvokeAgent  = "invoke_agent"
	OperationExecuteTool  = "execute_tool"
)

// Fail marks span failed: error.type is errType (an outcome code, a
// reason), the status Error with description. A no-op span ignores it.
func Fail(span Span, errType, description string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(KeyErrorType.String(errType))
	span.SetStatus(codes.Error, description)
}

// Work starts a span of host work (a workspace prepared, a sandbox
// started, a checkpoint, a push) under ctx's span, or under the run's
// root when ctx holds none of the run's trace. end ends it, failed with
// error.type "error" when err is not nil; the error's text stays out of
// the span (it may name paths, URLs or what a program printed).
func Work(ctx context.Context, tenant, runID, name string, attrs ...attribute.KeyValue) (context.Context, func(err error)) {
	if !Enabled() {
		return ctx, func(error) {}
	}
	ctx, span := Start(RunContext(ctx, tenant, runID), name, trace.WithAttributes(attrs...))
	return ctx, func(err error) {
		if err != nil {
			Fail(span, "error", name+" failed")
		}
		span.End()
	}
}

// SpanContext identifies a span (a caller's, from a traceparent header).
type SpanContext = trace.SpanContext
