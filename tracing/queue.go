package tracing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// queue is the span processor between the spans and the exporter: a
// bounded channel that OnEnd never waits on (a full queue drops the span
// and counts it) and one goroutine that exports batches, each bounded by
// the export timeout (a batch whose export fails or times out is counted
// dropped). So a collector that is down or never answers costs spans,
// never the time of whoever ended them.
type queue struct {
	exp      sdktrace.SpanExporter
	spans    chan sdktrace.ReadOnlySpan
	batch    int
	delay    time.Duration
	timeout  time.Duration
	flushes  chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	dropped, exported *atomic.Uint64
}

func newQueue(exp sdktrace.SpanExporter, c Config, dropped, exported *atomic.Uint64) *queue {
	q := &queue{exp: exp, spans: make(chan sdktrace.ReadOnlySpan, c.QueueSize), batch: c.BatchSize, delay: c.ScheduleDelay,
		timeout: c.ExportTimeout, flushes: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		dropped: dropped, exported: exported}
	go q.loop()
	return q
}

func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span, or drops it when the queue is full.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case q.spans <- s:
	default:
		q.dropped.Add(1)
	}
}

// loop exports a batch when it is full, when the oldest queued span has
// waited the schedule delay, on a flush, and what is left at Shutdown.
func (q *queue) loop() {
	defer close(q.done)
	buf := make([]sdktrace.ReadOnlySpan, 0, q.batch)
	timer := time.NewTimer(q.delay)
	timer.Stop()
	send := func() {
		if len(buf) > 0 {
			q.export(buf)
			buf = buf[:0]
		}
		timer.Stop()
	}
	for {
		select {
		case s := <-q.spans:
			if len(buf) == 0 {
				timer.Reset(q.delay)
			}
			if buf = append(buf, s); len(buf) >= q.batch {
				send()
			}
		case <-timer.C:
			send()
		case ack := <-q.flushes:
			q.drain(&buf, send)
			close(ack)
		case <-q.stop:
			q.drain(&buf, send)
			return
		}
	}
}

// drain exports everything queued now.
func (q *queue) drain(buf *[]sdktrace.ReadOnlySpan, send func()) {
	for {
		select {
		case s := <-q.spans:
			if *buf = append(*buf, s); len(*buf) >= q.batch {
				send()
			}
		default:
			send()
			return
		}
	}
}

func (q *queue) export(batch []sdktrace.ReadOnlySpan) {
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	defer cancel()
	if err := q.exp.ExportSpans(ctx, batch); err != nil {
		q.dropped.Add(uint64(len(batch)))
		return
	}
	q.exported.Add(uint64(len(batch)))
}

// ForceFlush exports what is queued, waiting at most until ctx ends.
func (q *queue) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case q.flushes <- ack:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued and shuts the exporter down, waiting at
// most until ctx ends (what is still queued then is counted dropped).
func (q *queue) Shutdown(ctx context.Context) error {
	q.stopOnce.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
		q.dropped.Add(uint64(len(q.spans)))
		return ctx.Err()
	}
	return q.exp.Shutdown(ctx)
}
