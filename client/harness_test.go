package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/transport/ndjson"
	"github.com/oecp/oecp/transport/websocket"
)

func TestMain(m *testing.M) {
	if os.Getenv("OECP_CLIENT_TEST_SERVE") == "1" {
		// Child mode for DialCommand tests: serve the empty cluster on stdio.
		d := &server.Dispatcher{Backend: server.EmptyBackend{}}
		_ = ndjson.Serve(context.Background(), d, os.Stdin, os.Stdout, os.Stderr, identity.Local(), server.Options{ShutdownGrace: 50 * time.Millisecond})
		os.Exit(0)
	}
	testkit.Main(m)
}

// lastWSURL is the URL of the most recent test WebSocket server.
var lastWSURL string

var serverOpts = server.Options{ShutdownGrace: 50 * time.Millisecond, WriteTimeout: 5 * time.Second}

// --- transports under test -------------------------------------------------

// binding starts a server over one binding and dials it.
type binding struct {
	name string
	// start serves b and returns a dialer plus a function that drops every
	// live connection from the server side.
	start func(t *testing.T, b server.Backend) (dial client.Dialer, drop func())
}

var bindings = []binding{
	{"websocket", startWS},
	{"ndjson", startNDJSON},
}

// trackingListener counts accepted connections and can drop them all.
type trackingListener struct {
	net.Listener
	accepts atomic.Int64
	mu      sync.Mutex
	conns   []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepts.Add(1)
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackingListener) dropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

// newWSServer serves b at /oecp on 127.0.0.1:0.
func newWSServer(t *testing.T, b server.Backend, resolver identity.Resolver) (url string, ln *trackingListener) {
	t.Helper()
	h := &websocket.Handler{Dispatcher: &server.Dispatcher{Backend: b}, Resolver: resolver, Options: serverOpts}
	mux := http.NewServeMux()
	mux.Handle("/oecp", h)
	srv := httptest.NewUnstartedServer(mux)
	ln = &trackingListener{Listener: srv.Listener}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		ln.dropAll()
		srv.Close()
		testkit.Wait(t, h)
	})
	lastWSURL = "ws://" + srv.Listener.Addr().String() + "/oecp"
	return lastWSURL, ln
}

func startWS(t *testing.T, b server.Backend) (client.Dialer, func()) {
	url, ln := newWSServer(t, b, nil)
	dial := func(ctx context.Context) (*client.Conn, error) {
		return client.Dial(ctx, url, client.DialOptions{AllowPlaintext: true})
	}
	return dial, ln.dropAll
}

// startNDJSON serves each dialled connection with ndjson.Serve over a pair
// of pipes.
func startNDJSON(t *testing.T, b server.Backend) (client.Dialer, func()) {
	d := &server.Dispatcher{Backend: b}
	var (
		mu    sync.Mutex
		drops []func()
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		mu.Lock()
		for _, f := range drops {
			f()
		}
		mu.Unlock()
		testkit.Wait(t, &wg)
	})
	dial := func(ctx context.Context) (*client.Conn, error) {
		cr, sw := io.Pipe() // server → client
		sr, cw := io.Pipe() // client → server
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = ndjson.Serve(context.Background(), d, sr, sw, io.Discard, identity.Local(), serverOpts)
			_ = sw.Close()
		}()
		mu.Lock()
		drops = append(drops, func() { _ = sr.Close(); _ = sw.Close() })
		mu.Unlock()
		return client.New(client.NewNDJSON(cr, cw, func() error { _ = cw.Close(); return cr.Close() }), client.Options{}), nil
	}
	drop := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range drops {
			f()
		}
		drops = nil
	}
	return dial, drop
}

func mustDial(t *testing.T, dial client.Dialer) *client.Conn {
	t.Helper()
	c, err := dial(context.Background())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// --- a fake backend ---------------------------------------------------------

// fakeBackend serves every method with canned results, records params, and
// keeps one run's event log that watches replay and follow.
type fakeBackend struct {
	server.Unsupported

	mu     sync.Mutex
	events []fakeEvent
	wake   chan struct{}
	params map[string]any

	// getGate, when set, makes Get block until its ctx ends, announcing
	// the start on getStarted and the cancellation on getCancelled.
	getGate      bool
	getStarted   chan struct{}
	getCancelled chan struct{}

	rejectCursors bool   // watch with fromCursor answers NOT_FOUND
	gone          bool   // watch answers GONE
	compacted     bool   // watch with fromCursor answers GONE (compacted)
	slowAfter     string // close SLOW_CONSUMER after delivering this cursor (once)
	dupAfter      string // redeliver this cursor right after itself (once)
	watchCalls    []protocol.WatchParams
	streamClosed  chan string // subscription ids whose stream was closed
}

type fakeEvent struct {
	cursor string
	body   string // WatchEvent JSON
}

func newFake() *fakeBackend {
	return &fakeBackend{wake: make(chan struct{}), params: map[string]any{}, getStarted: make(chan struct{}, 8), getCancelled: make(chan struct{}, 8), streamClosed: make(chan string, 64)}
}

func (b *fakeBackend) appendEvents(bodies ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, body := range bodies {
		b.events = append(b.events, fakeEvent{cursor: fmt.Sprintf("c%d", len(b.events)+1), body: body})
	}
	close(b.wake)
	b.wake = make(chan struct{})
}

func (b *fakeBackend) record(method string, p any) {
	b.mu.Lock()
	b.params[method] = p
	b.mu.Unlock()
}

func (b *fakeBackend) recorded(method string) any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.params[method]
}

func status() protocol.ClusterStatus {
	g, r, c := int64(1), "run-1", "c1"
	return protocol.ClusterStatus{Phase: protocol.PhaseRunning, ObservedGeneration: &g, CurrentRunID: &r, AtCursor: &c,
		Operational: &protocol.OperationalStatus{Labels: map[string]string{"team": "a"}, LogLevel: "info", DispatchState: "active"}}
}

func (b *fakeBackend) Initialize(context.Context) (*protocol.InitializeResult, error) {
	return &protocol.InitializeResult{ProtocolVersion: protocol.Version, Capabilities: protocol.Capabilities{GraphProfiles: []string{}, Logs: true, AgentAttach: true}, Status: status()}, nil
}

func (b *fakeBackend) Get(ctx context.Context, p protocol.GetParams) (*protocol.GetResult, error) {
	b.record("get", p)
	if b.getGate {
		b.getStarted <- struct{}{}
		<-ctx.Done()
		b.getCancelled <- struct{}{}
		return nil, ctx.Err()
	}
	out, _ := protocol.NormalizeValue([]byte(`{"answer":42}`))
	return &protocol.GetResult{Spec: json.RawMessage(`{"profile":"x"}`), Status: status(), AtCursor: status().AtCursor,
		TerminalResult: &protocol.TerminalResult{Status: "succeeded", Output: &out}}, nil
}

func (b *fakeBackend) Plan(_ context.Context, p protocol.PlanParams) (*protocol.PlanResult, error) {
	b.record("plan", p)
	return &protocol.PlanResult{OK: true, Diagnostics: json.RawMessage(`[]`), Bounds: json.RawMessage(`{"maxNodeExecutions":1}`)}, nil
}

func (b *fakeBackend) Apply(_ context.Context, p protocol.ApplyParams) (*protocol.ApplyResult, error) {
	b.record("apply", p)
	g, r := int64(1), "run-1"
	return &protocol.ApplyResult{Generation: &g, RunID: &r, Phase: protocol.PhaseRunning}, nil
}

func (b *fakeBackend) Update(_ context.Context, p protocol.UpdateParams) (*protocol.UpdateResult, error) {
	b.record("update", p)
	return &protocol.UpdateResult{Generation: 1, RunID: "run-1", Phase: protocol.PhaseRunning, Operational: *status().Operational, AtCursor: "c2"}, nil
}

func (b *fakeBackend) Stop(_ context.Context, p protocol.StopParams) (*protocol.StopResult, error) {
	b.record("stop", p)
	return &protocol.StopResult{Generation: 1, RunID: "run-1", Phase: protocol.PhaseFinished, AcceptedMode: p.Mode, EffectiveMode: p.Mode, Operational: *status().Operational, AtCursor: "c3"}, nil
}

func (b *fakeBackend) Retry(_ context.Context, p protocol.RetryParams) (*protocol.RetryResult, error) {
	b.record("retry", p)
	return nil, protocol.AppError(protocol.NoRetryableFrontier, protocol.MsgNoFrontier, map[string]any{"reason": "exhausted"})
}

func (b *fakeBackend) Resubmit(_ context.Context, p protocol.ResubmitParams) (*protocol.ResubmitResult, error) {
	b.record("resubmit", p)
	return &protocol.ResubmitResult{Generation: 1, PriorRunID: p.IfRunID, RunID: "run-2", Phase: protocol.PhaseRunning, Operational: *status().Operational, AtCursor: "c9"}, nil
}

func (b *fakeBackend) Delete(_ context.Context, p protocol.DeleteParams) (*protocol.DeleteResult, error) {
	b.record("delete", p)
	return &protocol.DeleteResult{Deleted: true, Phase: protocol.PhaseEmpty}, nil
}

var subCounter atomic.Int64

func (b *fakeBackend) Watch(_ context.Context, p protocol.WatchParams) (*server.Subscription, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.watchCalls = append(b.watchCalls, p)
	if b.gone {
		return nil, protocol.AppError(protocol.Gone, protocol.MsgRunGone, map[string]any{"tombstonedAt": "c9"})
	}
	if p.RunID != nil && *p.RunID != "run-1" {
		return nil, protocol.AppError(protocol.NotFound, protocol.MsgRunNotFound, nil)
	}
	pos := 0
	if p.FromCursor != nil {
		if b.compacted {
			return nil, protocol.AppError(protocol.Gone, protocol.MsgRunGone, map[string]any{"compactedThrough": "c9"})
		}
		if b.rejectCursors {
			return nil, protocol.AppError(protocol.NotFound, protocol.MsgRunNotFound, nil)
		}
		pos = -1
		for i, e := range b.events {
			if e.cursor == *p.FromCursor {
				pos = i + 1
			}
		}
		if pos < 0 {
			return nil, protocol.AppError(protocol.NotFound, protocol.MsgRunNotFound, nil)
		}
	}
	id := fmt.Sprintf("sub-%d", subCounter.Add(1))
	run := "run-1"
	var tail *string
	if n := len(b.events); n > 0 {
		c := b.events[n-1].cursor
		tail = &c
	}
	return &server.Subscription{ID: id, Result: protocol.WatchResult{SubscriptionID: id, RunID: &run, AtCursor: tail},
		Stream: &fakeStream{b: b, id: id, pos: pos}, TrackCursor: true}, nil
}

type fakeStream struct {
	b       *fakeBackend
	id      string
	pos     int
	pending []server.Notification
}

func (s *fakeStream) Next(ctx context.Context) (server.Notification, error) {
	if len(s.pending) > 0 {
		n := s.pending[0]
		s.pending = s.pending[1:]
		return n, nil
	}
	for {
		s.b.mu.Lock()
		if s.pos < len(s.b.events) {
			e := s.b.events[s.pos]
			s.pos++
			n := server.Notification{Rest: []byte(`,"runId":"run-1","cursor":"` + e.cursor + `","event":` + e.body), Cursor: e.cursor}
			if s.b.dupAfter == e.cursor {
				s.b.dupAfter = ""
				s.pending = append(s.pending, n)
			}
			if s.b.slowAfter == e.cursor {
				s.b.slowAfter = ""
				s.pending = append(s.pending, server.Notification{Closed: protocol.SlowConsumer})
			}
			s.b.mu.Unlock()
			return n, nil
		}
		wake := s.b.wake
		s.b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return server.Notification{}, ctx.Err()
		}
	}
}

func (s *fakeStream) Close() { s.b.streamClosed <- s.id }

// liveStream serves logs and agent/attach: a fixed list of notification
// bodies, then it waits for cancellation.
type liveStream struct {
	id     string
	rests  []string
	closed chan string
}

func (s *liveStream) Next(ctx context.Context) (server.Notification, error) {
	if len(s.rests) > 0 {
		r := s.rests[0]
		s.rests = s.rests[1:]
		return server.Notification{Rest: []byte(r)}, nil
	}
	<-ctx.Done()
	return server.Notification{}, ctx.Err()
}

func (s *liveStream) Close() { s.closed <- s.id }

func (b *fakeBackend) Logs(context.Context, protocol.LogsParams) (*server.Subscription, error) {
	id := fmt.Sprintf("sub-%d", subCounter.Add(1))
	return &server.Subscription{ID: id, Result: protocol.SubscriptionResult{SubscriptionID: id},
		Stream: &liveStream{id: id, closed: b.streamClosed, rests: []string{`,"record":{"level":"info","target":"engine","message":"hello"}`}}}, nil
}

func (b *fakeBackend) AgentAttach(_ context.Context, p protocol.AgentAttachParams) (*server.Subscription, error) {
	if p.Execution != "exec-1" {
		return nil, protocol.AppError(protocol.NotFound, protocol.MsgExecNotFound, nil)
	}
	id := fmt.Sprintf("sub-%d", subCounter.Add(1))
	return &server.Subscription{ID: id, Result: protocol.SubscriptionResult{SubscriptionID: id},
		Stream: &liveStream{id: id, closed: b.streamClosed, rests: []string{`,"event":{"type":"working"}`, `,"event":{"type":"output","text":"hi"}`}}}, nil
}

// event bodies of a small run.
const (
	evAdmission = `{"type":"phase","status":{"phase":"running","observedGeneration":1,"currentRunId":"run-1","atCursor":"c1"},"admission":{"runId":"run-1","spec":{},"seedInput":null}}`
	evBegin     = `{"type":"node_begin","node":{"node":"worker","attempt":1},"input":null}`
	evEnd       = `{"type":"node_end","node":{"node":"worker","attempt":1},"outcome":{"status":"verified","output":null,"artifacts":[]}}`
	evBookmark  = `{"type":"bookmark"}`
	evFinished  = `{"type":"finished","final_status":{"phase":"finished","observedGeneration":1,"currentRunId":"run-1","atCursor":"c5"}}`
)
