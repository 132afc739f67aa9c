package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

// The logs and agent/attach subscriptions are live, cursorless and
// future-only (§8.3, §8.4): nothing is stored, so they fan out in process.
// Each published item is encoded once and offered to every subscriber's
// bounded queue without blocking; a full queue drops that subscriber,
// which drains what it had and then closes with SLOW_CONSUMER (no cursor).

type liveHub struct {
	cap int

	mu    sync.Mutex
	logs  map[string]map[*liveSub]struct{} // tenant -> subscribers
	execs map[string]*execState            // tenant\x00ref -> execution
}

type execState struct {
	active bool
	subs   map[*liveSub]struct{}
}

type liveSub struct {
	hub *liveHub
	ch  chan []byte
	// overflowed is written under hub.mu before ch is closed, and read
	// after the close is observed.
	overflowed bool
	set        map[*liveSub]struct{} // the set it is registered in
}

func newLiveHub(capacity int) *liveHub {
	return &liveHub{cap: capacity, logs: map[string]map[*liveSub]struct{}{}, execs: map[string]*execState{}}
}

func (h *liveHub) newSub(set map[*liveSub]struct{}) *liveSub {
	s := &liveSub{hub: h, ch: make(chan []byte, h.cap), set: set}
	set[s] = struct{}{}
	return s
}

// publish offers rest to every subscriber of set; the caller holds h.mu.
func (h *liveHub) publish(set map[*liveSub]struct{}, rest []byte) {
	for s := range set {
		select {
		case s.ch <- rest:
		default:
			s.overflowed = true
			delete(set, s)
			close(s.ch)
		}
	}
}

// endAll closes every subscriber of set silently; the caller holds h.mu.
func (h *liveHub) endAll(set map[*liveSub]struct{}) {
	for s := range set {
		delete(set, s)
		close(s.ch)
	}
}

func (s *liveSub) Next(ctx context.Context) (server.Notification, error) {
	select {
	case rest, ok := <-s.ch:
		if ok {
			return server.Notification{Rest: rest}, nil
		}
		s.hub.mu.Lock()
		over := s.overflowed
		s.overflowed = false // Closed is terminal; yield it once
		s.hub.mu.Unlock()
		if over {
			return server.Notification{Closed: protocol.SlowConsumer}, nil
		}
		return server.Notification{}, io.EOF
	case <-ctx.Done():
		return server.Notification{}, ctx.Err()
	}
}

func (s *liveSub) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	if _, ok := s.set[s]; ok {
		delete(s.set, s)
		close(s.ch)
	}
}

// Logs subscribes to the caller's cluster-wide log records.
func (b *Backend) Logs(ctx context.Context, _ protocol.LogsParams) (*server.Subscription, error) {
	if !b.cfg.Logs {
		return nil, protocol.Unsupported("logs")
	}
	tenant := b.tenant(ctx)
	h := b.live
	h.mu.Lock()
	set := h.logs[tenant]
	if set == nil {
		set = map[*liveSub]struct{}{}
		h.logs[tenant] = set
	}
	s := h.newSub(set)
	h.mu.Unlock()
	id := b.nextSubscription()
	return &server.Subscription{ID: id, Result: &protocol.SubscriptionResult{SubscriptionID: id}, Stream: s, MaxEventBytes: protocol.MaxNotificationBytes}, nil
}

// AgentAttach subscribes to one active execution's output. An unknown
// execution (or another tenant's) is NOT_FOUND; a finished one is GONE.
func (b *Backend) AgentAttach(ctx context.Context, p protocol.AgentAttachParams) (*server.Subscription, error) {
	if !b.cfg.AgentAttach {
		return nil, protocol.Unsupported("agent attach")
	}
	tenant := b.tenant(ctx)
	h := b.live
	h.mu.Lock()
	e, ok := h.execs[tenant+"\x00"+p.Execution]
	if !ok {
		h.mu.Unlock()
		return nil, protocol.AppError(protocol.NotFound, protocol.MsgExecNotFound, nil)
	}
	if !e.active {
		h.mu.Unlock()
		return nil, protocol.AppError(protocol.Gone, protocol.MsgExecGone, nil)
	}
	s := h.newSub(e.subs)
	h.mu.Unlock()
	id := b.nextSubscription()
	return &server.Subscription{ID: id, Result: &protocol.SubscriptionResult{SubscriptionID: id}, Stream: s, MaxEventBytes: protocol.MaxNotificationBytes}, nil
}

// ErrInvalidRecord is returned for a log record or attach event that breaks
// the protocol's bounds in a way redaction cannot fix.
var ErrInvalidRecord = errors.New("cluster: invalid live record")

func validText(s string, maxBytes int) bool {
	return len(s) <= maxBytes && utf8.ValidString(s) && !protocol.HasControl(s)
}

// PublishLog publishes one log record to the tenant's logs subscribers. A
// message over 16,384 bytes is replaced by the redaction marker; a bad
// level, a target outside 1..128 bytes, or control characters are
// rejected.
func (b *Backend) PublishLog(tenant string, r protocol.LogRecord) error {
	rest, err := logRest(r)
	if err != nil {
		return err
	}
	b.publishLogKey(b.TenantKey(tenant), rest)
	return nil
}

// logRest validates and encodes one log record's notification tail.
func logRest(r protocol.LogRecord) ([]byte, error) {
	if !oneOf(r.Level, protocol.LogLevels...) {
		return nil, fmt.Errorf("%w: level %q", ErrInvalidRecord, r.Level)
	}
	if r.Target == "" || !validText(r.Target, protocol.MaxLogTargetBytes) {
		return nil, fmt.Errorf("%w: target must be 1..%d bytes without controls", ErrInvalidRecord, protocol.MaxLogTargetBytes)
	}
	if len(r.Message) > protocol.MaxLogMessageBytes {
		r.Message = protocol.RedactedLogMessage
	}
	if !validText(r.Message, protocol.MaxLogMessageBytes) {
		return nil, fmt.Errorf("%w: message must not contain control characters", ErrInvalidRecord)
	}
	rec, err := protocol.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append([]byte(`,"record":`), rec...), nil
}

// publishLogKey fans an encoded record out to a store tenant's
// subscribers.
func (b *Backend) publishLogKey(key string, rest []byte) {
	h := b.live
	h.mu.Lock()
	h.publish(h.logs[key], rest)
	h.mu.Unlock()
}

// StartExecution registers an active execution that agent/attach can
// follow (the engine calls it when a turn's agent starts).
func (b *Backend) StartExecution(tenant, execution string) error {
	if err := protocol.ValidExecutionRef(execution); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	b.startExecutionKey(b.TenantKey(tenant), execution)
	return nil
}

func (b *Backend) startExecutionKey(tenantKey, execution string) {
	key := tenantKey + "\x00" + execution
	h := b.live
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.execs[key]; ok {
		e.active = true
		return
	}
	h.execs[key] = &execState{active: true, subs: map[*liveSub]struct{}{}}
}

// PublishAttach publishes one agent/attach event of an active execution.
// Output text over 16,384 bytes is replaced by the redaction marker.
func (b *Backend) PublishAttach(tenant, execution string, ev protocol.AttachEvent) error {
	rest, err := attachRest(ev)
	if err != nil {
		return err
	}
	return b.publishAttachKey(b.TenantKey(tenant), execution, rest)
}

// attachRest validates and encodes one attach event's notification tail.
func attachRest(ev protocol.AttachEvent) ([]byte, error) {
	switch ev.Type {
	case "working", "settled":
		ev.Text = nil
	case "output":
		if ev.Text == nil {
			return nil, fmt.Errorf("%w: output without text", ErrInvalidRecord)
		}
		t := *ev.Text
		if len(t) > protocol.MaxAttachOutputBytes {
			t = protocol.RedactedAttachOutput
		}
		if !validText(t, protocol.MaxAttachOutputBytes) {
			return nil, fmt.Errorf("%w: output must not contain control characters", ErrInvalidRecord)
		}
		ev.Text = &t
	default:
		return nil, fmt.Errorf("%w: attach event type %q", ErrInvalidRecord, ev.Type)
	}
	raw, err := protocol.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return append([]byte(`,"event":`), raw...), nil
}

func (b *Backend) publishAttachKey(tenantKey, execution string, rest []byte) error {
	key := tenantKey + "\x00" + execution
	h := b.live
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.execs[key]
	if !ok || !e.active {
		return fmt.Errorf("%w: execution %q is not active", ErrInvalidRecord, execution)
	}
	h.publish(e.subs, rest)
	return nil
}

// EndExecution marks an execution inactive: its subscribers' streams end
// (silently, as the reference's do) and new attaches answer GONE.
func (b *Backend) EndExecution(tenant, execution string) {
	b.endExecutionKey(b.TenantKey(tenant), execution)
}

func (b *Backend) endExecutionKey(tenantKey, execution string) {
	key := tenantKey + "\x00" + execution
	h := b.live
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.execs[key]; ok {
		e.active = false
		h.endAll(e.subs)
	}
}
