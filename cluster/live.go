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
// future-only: nothing is stored, so they fan out in process (and, on a
// store shared by replicas, to the other replicas: liverelay.go).
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
	return b.subscribeLive(ctx, b.cfg.Logs, "logs", func(h *liveHub, tenant string) (map[*liveSub]struct{}, error) {
		set := h.logs[tenant]
		if set == nil {
			set = map[*liveSub]struct{}{}
			h.logs[tenant] = set
		}
		return set, nil
	})
}

// AgentAttach subscribes to one active execution's output. An unknown
// execution (or another tenant's) is NOT_FOUND; a finished one is GONE.
// An execution this process never heard of (it runs on a replica that
// started it before this one started) is looked up in the store: one
// still open there is followed like one heard of (liverelay.go).
func (b *Backend) AgentAttach(ctx context.Context, p protocol.AgentAttachParams) (*server.Subscription, error) {
	var found execFound
	if b.cfg.AgentAttach && !b.live.knows(b.tenant(ctx), p.Execution) {
		var err error
		if found, err = b.findExecution(ctx, b.tenant(ctx), p.Execution); err != nil {
			return nil, b.wire(err)
		}
	}
	return b.subscribeLive(ctx, b.cfg.AgentAttach, "agent attach", func(h *liveHub, tenant string) (map[*liveSub]struct{}, error) {
		key := tenant + "\x00" + p.Execution
		e, ok := h.execs[key]
		switch {
		case !ok && found == execOpen:
			e = &execState{active: true, subs: map[*liveSub]struct{}{}}
			h.execs[key] = e
		case !ok && found == execEnded:
			return nil, protocol.AppError(protocol.Gone, protocol.MsgExecGone, nil)
		case !ok:
			return nil, protocol.AppError(protocol.NotFound, protocol.MsgExecNotFound, nil)
		}
		if !e.active {
			return nil, protocol.AppError(protocol.Gone, protocol.MsgExecGone, nil)
		}
		return e.subs, nil
	})
}

// subscribeLive opens a logs or agent/attach subscription of the caller:
// cursorless, with the protocol's notification size bound, joining the
// subscriber set join picks under the hub's lock. A capability that is not
// served answers INVALID_PHASE "Backend does not support <what>".
func (b *Backend) subscribeLive(ctx context.Context, served bool, what string, join func(h *liveHub, tenant string) (map[*liveSub]struct{}, error)) (*server.Subscription, error) {
	if !served {
		return nil, protocol.Unsupported(what)
	}
	tenant := b.tenant(ctx)
	h := b.live
	h.mu.Lock()
	set, err := join(h, tenant)
	if err != nil {
		h.mu.Unlock()
		return nil, err
	}
	s := h.newSub(set)
	h.mu.Unlock()
	id := b.nextSubscription()
	return &server.Subscription{ID: id, Result: &protocol.SubscriptionResult{SubscriptionID: id}, Stream: s, MaxEventBytes: protocol.MaxNotificationBytes}, nil
}

// errInvalidRecord: a log record or attach event breaks the protocol's
// bounds in a way redaction cannot fix; it is not published.
var errInvalidRecord = errors.New("cluster: invalid live record")

func validText(s string, maxBytes int) bool {
	return len(s) <= maxBytes && utf8.ValidString(s) && !protocol.HasControl(s)
}

// logRest validates and encodes one log record's notification tail. A
// message over protocol.MaxLogMessageBytes is replaced by the redaction
// marker; a bad level, a target outside 1..protocol.MaxLogTargetBytes
// bytes, or control characters are refused.
func logRest(r protocol.LogRecord) ([]byte, error) {
	if !oneOf(r.Level, protocol.LogLevels...) {
		return nil, fmt.Errorf("%w: level %q", errInvalidRecord, r.Level)
	}
	if r.Target == "" || !validText(r.Target, protocol.MaxLogTargetBytes) {
		return nil, fmt.Errorf("%w: target must be 1..%d bytes without controls", errInvalidRecord, protocol.MaxLogTargetBytes)
	}
	if len(r.Message) > protocol.MaxLogMessageBytes {
		r.Message = protocol.RedactedLogMessage
	}
	if !validText(r.Message, protocol.MaxLogMessageBytes) {
		return nil, fmt.Errorf("%w: message must not contain control characters", errInvalidRecord)
	}
	rec, err := protocol.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append([]byte(`,"record":`), rec...), nil
}

// publishLog fans an encoded record out to a tenant's logs subscribers.
func (b *Backend) publishLog(tenant string, rest []byte) {
	h := b.live
	h.mu.Lock()
	h.publish(h.logs[tenant], rest)
	h.mu.Unlock()
	b.relay.send(liveLog, tenant, "", rest)
}

// startExecution registers an active execution that agent/attach can
// follow.
func (b *Backend) startExecution(tenant, execution string) {
	key := tenant + "\x00" + execution
	b.relay.send(liveStart, tenant, execution, nil)
	h := b.live
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.execs[key]; ok {
		e.active = true
		return
	}
	h.execs[key] = &execState{active: true, subs: map[*liveSub]struct{}{}}
}

// attachRest validates and encodes one attach event's notification tail.
// Output text over protocol.MaxAttachOutputBytes is replaced by the
// redaction marker; control characters are refused.
func attachRest(ev protocol.AttachEvent) ([]byte, error) {
	switch ev.Type {
	case "working", "settled":
		ev.Text = nil
	case "output":
		if ev.Text == nil {
			return nil, fmt.Errorf("%w: output without text", errInvalidRecord)
		}
		t := *ev.Text
		if len(t) > protocol.MaxAttachOutputBytes {
			t = protocol.RedactedAttachOutput
		}
		if !validText(t, protocol.MaxAttachOutputBytes) {
			return nil, fmt.Errorf("%w: output must not contain control characters", errInvalidRecord)
		}
		ev.Text = &t
	default:
		return nil, fmt.Errorf("%w: attach event type %q", errInvalidRecord, ev.Type)
	}
	raw, err := protocol.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return append([]byte(`,"event":`), raw...), nil
}

// attach publishes one agent/attach event of an active execution to its
// subscribers; an invalid event, or one for an execution that is not
// active, is dropped.
func (b *Backend) attach(tenant, execution string, ev protocol.AttachEvent) {
	rest, err := attachRest(ev)
	if err != nil {
		return
	}
	h := b.live
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.execs[tenant+"\x00"+execution]; ok && e.active {
		h.publish(e.subs, rest)
		b.relay.send(liveEvent, tenant, execution, rest)
	}
}

// endExecution marks an execution inactive: its subscribers' streams end
// silently and new attaches answer GONE.
func (b *Backend) endExecution(tenant, execution string) {
	b.relay.send(liveEnd, tenant, execution, nil)
	h := b.live
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.execs[tenant+"\x00"+execution]; ok {
		e.active = false
		h.endAll(e.subs)
	}
}
