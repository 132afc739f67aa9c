package server

import (
	"bytes"
	"context"
	"strconv"

	"go.opentelemetry.io/otel/trace"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/tracing"
)

// A server span per dispatched request (OpenTelemetry's RPC conventions:
// rpc.system jsonrpc, rpc.method, and the answer's error code), a child of
// the span the peer's connection named (Options.Caller) so that a caller
// that sent a traceparent finds its requests in its own trace. While
// tracing is off a request pays one atomic load and no allocation.

// traceRequest starts the span of request method m (nil while tracing is
// off).
func (c *Conn) traceRequest(ctx context.Context, m *protocol.MethodInfo) (context.Context, tracing.Span) {
	if !tracing.Enabled() {
		return ctx, nil
	}
	return startRequest(ctx, m)
}

func startRequest(ctx context.Context, m *protocol.MethodInfo) (context.Context, tracing.Span) {
	return tracing.Start(ctx, m.Name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		tracing.KeyRPCSystem.String("jsonrpc"), tracing.KeyRPCSysName.String("jsonrpc"), tracing.KeyRPCMethod.String(m.Name)))
}

// traceAnswered ends a request's span with its answer frame (nil: it was
// cancelled before it had one).
func traceAnswered(span tracing.Span, frame []byte) {
	if span == nil {
		return
	}
	switch code := AnswerCode(frame); {
	case frame == nil:
		tracing.Fail(span, protocol.Cancelled, "cancelled")
	case code != CodeOK:
		if n, ok := jsonrpcCode(frame); ok {
			span.SetAttributes(tracing.KeyJSONRPCCode.Int(n))
		}
		span.SetAttributes(tracing.KeyRPCStatus.String(Codes[code]))
		tracing.Fail(span, Codes[code], Codes[code])
	}
	span.End()
}

// traceEstablished ends a subscription's span at its establishment.
func traceEstablished(span tracing.Span, sub *Subscription, errFrame []byte) {
	if span == nil {
		return
	}
	if sub != nil {
		span.End()
		return
	}
	traceAnswered(span, errFrame)
}

// jsonrpcCode is an error frame's numeric JSON-RPC code.
func jsonrpcCode(frame []byte) (int, bool) {
	const head = `"error":{"code":`
	i := bytes.Index(frame, []byte(head))
	if i < 0 {
		return 0, false
	}
	rest := frame[i+len(head):]
	end := bytes.IndexAny(rest, ",}")
	if end < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(rest[:end])))
	return n, err == nil
}
