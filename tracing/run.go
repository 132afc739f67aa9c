package tracing

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/oecp/oecp/protocol"
)

// RootSpanName names a run's root span.
const RootSpanName = "run"

// runIDs derives a run's trace id and its root span id from its tenant
// (the key the engine names it by) and its id: any replica, before or
// after a restart, finds the same ones, so a run is one trace without
// anything stored. The hash keeps tenants apart and is uniform, as ratio
// sampling on the trace id wants.
func runIDs(tenant, runID string) (trace.TraceID, trace.SpanID) {
	h := sha256.Sum256([]byte("oecp/run\x00" + tenant + "\x00" + runID))
	var t trace.TraceID
	var s trace.SpanID
	copy(t[:], h[:16])
	copy(s[:], h[16:24])
	if !s.IsValid() {
		s[7] = 1
	}
	return t, s
}

// RunTraceID is the trace id of a run: the same on every replica.
func RunTraceID(tenant, runID string) trace.TraceID {
	t, _ := runIDs(tenant, runID)
	return t
}

// RunTraceIDString is RunTraceID in hex while tracing is on, "" when off.
func RunTraceIDString(tenant, runID string) string {
	if !Enabled() {
		return ""
	}
	return RunTraceID(tenant, runID).String()
}

// RunSpanContext is the span context of a run's root span, sampled as the
// configured sampler decides for the run's trace id (the decision every
// replica takes alike).
func RunSpanContext(tenant, runID string) trace.SpanContext {
	t, s := runIDs(tenant, runID)
	var flags trace.TraceFlags
	if st := current.Load(); st != nil && sampled(st.sampler, t) {
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: t, SpanID: s, TraceFlags: flags, Remote: true})
}

func sampled(s sdktrace.Sampler, t trace.TraceID) bool {
	r := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: t, Name: RootSpanName, Kind: trace.SpanKindInternal})
	return r.Decision == sdktrace.RecordAndSample
}

// RunContext is ctx with the run's root span as the parent of the spans
// started from it, unless ctx already holds a span of the run's trace.
// While tracing is off it is ctx.
func RunContext(ctx context.Context, tenant, runID string) context.Context {
	if !Enabled() {
		return ctx
	}
	t, _ := runIDs(tenant, runID)
	if sc := trace.SpanContextFromContext(ctx); sc.TraceID() == t {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, RunSpanContext(tenant, runID))
}

// The run's root span is started and ended at once, when the run ends,
// with the time its start was noted in this process: so no span stays
// open while a run waits, and a replica that loses a run drops a note,
// not a span. A run noted by its admission (RunCreated) starts then and
// links to the request that created it; one this process only took over
// (RunSeen) starts when it was first seen here and says it resumed.
type runNote struct {
	start   time.Time
	link    trace.SpanContext
	resumed bool
}

type runKey struct{ tenant, runID string }

// maxRunNotes bounds the notes kept; past it they are all dropped (a run
// whose note was dropped gets a root that starts when it ends).
const maxRunNotes = 1 << 16

var notes struct {
	mu sync.Mutex
	m  map[runKey]runNote
}

// note keeps n as k's note unless k has one: a creation's note replaces
// only a takeover's (the engine may see a run before its admission's
// request is done), and keeps the earlier start.
func note(k runKey, n runNote) {
	notes.mu.Lock()
	defer notes.mu.Unlock()
	if old, ok := notes.m[k]; ok {
		if !old.resumed || n.resumed {
			return
		}
		if old.start.Before(n.start) {
			n.start = old.start
		}
	}
	if notes.m == nil || len(notes.m) >= maxRunNotes {
		notes.m = map[runKey]runNote{}
	}
	notes.m[k] = n
}

// RunCreated notes that a request (ctx's span, linked from the run's root)
// admitted the run now; a replayed admission of a run already noted
// changes nothing.
func RunCreated(ctx context.Context, tenant, runID string) {
	if !Enabled() {
		return
	}
	note(runKey{tenant, runID}, runNote{start: time.Now(), link: trace.SpanContextFromContext(ctx)})
}

// RunSeen notes that this process supervises the run from now, unless its
// start is noted already. A run whose id is a UUIDv7 (every id the server
// gives) starts at its id's time: a run another replica admitted keeps
// its whole duration here.
func RunSeen(tenant, runID string) {
	if !Enabled() {
		return
	}
	note(runKey{tenant, runID}, runNote{start: seenStart(runID, time.Now()), resumed: true})
}

// seenStart is the time a run's UUIDv7 id carries when it is before now,
// else now.
func seenStart(runID string, now time.Time) time.Time {
	if t, ok := protocol.RunIDTime(runID); ok && t.Before(now) {
		return t
	}
	return now
}

// RunDropped forgets a run this process no longer supervises (its root is
// the business of the replica that ends it).
func RunDropped(tenant, runID string) {
	notes.mu.Lock()
	defer notes.mu.Unlock()
	delete(notes.m, runKey{tenant, runID})
}

// RunFinished emits the run's root span: from its noted start (now when
// none is) to now, with its terminal status; a failed run carries
// error.type = reason (or "failed").
func RunFinished(tenant, runID, status, reason string) {
	s := current.Load()
	notes.mu.Lock()
	n, ok := notes.m[runKey{tenant, runID}]
	delete(notes.m, runKey{tenant, runID})
	notes.mu.Unlock()
	if s == nil {
		return
	}
	now := time.Now()
	if !ok {
		n = runNote{start: seenStart(runID, now), resumed: true}
	}
	t, sid := runIDs(tenant, runID)
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithTimestamp(n.start), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(KeyRunID.String(runID), KeyRunStatus.String(status))}
	if n.link.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: n.link}))
	}
	if n.resumed {
		opts = append(opts, trace.WithAttributes(KeyRunResumed.Bool(true)))
	}
	if reason != "" {
		opts = append(opts, trace.WithAttributes(KeyRunReason.String(reason)))
	}
	_, span := s.tracer.Start(withIDs(context.Background(), t, sid), RootSpanName, opts...)
	if status != "succeeded" {
		if reason == "" {
			reason = "failed"
		}
		span.SetAttributes(KeyErrorType.String(reason))
		span.SetStatus(codes.Error, "run "+status)
	}
	span.End(trace.WithTimestamp(now))
}
