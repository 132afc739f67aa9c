package tracing

import (
	"context"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// ids generates random ids, except for a span started with forcedIDs in
// its context (a run's root span, whose ids are derived from the run).
type ids struct{}

// forcedKey carries the ids a new root span must take.
type forcedKey struct{}

type forcedIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

func withIDs(ctx context.Context, t trace.TraceID, s trace.SpanID) context.Context {
	return context.WithValue(ctx, forcedKey{}, forcedIDs{t, s})
}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := ctx.Value(forcedKey{}).(forcedIDs); ok {
		return f.trace, f.span
	}
	var t trace.TraceID
	for !t.IsValid() {
		putUint64(t[:8], rand.Uint64())
		putUint64(t[8:], rand.Uint64())
	}
	return t, randomSpanID()
}

func (ids) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return randomSpanID() }

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		putUint64(s[:], rand.Uint64())
	}
	return s
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}
