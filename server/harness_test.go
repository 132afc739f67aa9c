package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

// scriptBackend is an empty cluster whose get is scripted by its atCursor
// param: "block" waits for ctx; "gate:NAME" waits for Open(NAME) and
// ignores ctx (a handler that does not honour cancellation); anything else
// (or none) answers at once. It records every call and cancellation.
type scriptBackend struct {
	server.EmptyBackend

	mu        sync.Mutex
	gates     map[string]chan struct{}
	started   map[string]chan struct{}
	cancelled map[string]chan struct{}
	calls     int
	subCalls  int
}

func newScript() *scriptBackend {
	return &scriptBackend{gates: map[string]chan struct{}{}, started: map[string]chan struct{}{}, cancelled: map[string]chan struct{}{}}
}

func (b *scriptBackend) ch(m map[string]chan struct{}, name string) chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := m[name]
	if !ok {
		c = make(chan struct{})
		m[name] = c
	}
	return c
}

// Open releases gate name.
func (b *scriptBackend) Open(name string) { close(b.ch(b.gates, name)) }

// Started is closed when the call tagged name has begun.
func (b *scriptBackend) Started(name string) <-chan struct{} { return b.ch(b.started, name) }

// Cancelled is closed when the call tagged name saw its ctx cancelled.
func (b *scriptBackend) Cancelled(name string) <-chan struct{} { return b.ch(b.cancelled, name) }

func (b *scriptBackend) Calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

func (b *scriptBackend) Get(ctx context.Context, p protocol.GetParams) (*protocol.GetResult, error) {
	b.mu.Lock()
	b.calls++
	b.mu.Unlock()
	tag := ""
	if p.AtCursor != nil {
		tag = *p.AtCursor
	}
	switch {
	case tag == "":
	case strings.HasPrefix(tag, "block:"):
		close(b.ch(b.started, tag))
		<-ctx.Done()
		close(b.ch(b.cancelled, tag))
	case strings.HasPrefix(tag, "gate:"):
		close(b.ch(b.started, tag))
		<-b.ch(b.gates, tag)
		if ctx.Err() != nil {
			close(b.ch(b.cancelled, tag))
		}
	}
	return &protocol.GetResult{Spec: []byte("null"), Status: protocol.EmptyStatus()}, nil
}

// RunUnary scripts run/submit by its runId as Get does by its tag:
// "gate-NAME" waits for Open("gate-NAME") and ignores ctx; anything else
// answers at once with the run id.
func (b *scriptBackend) RunUnary(ctx context.Context, method string, p protocol.RunParams) (any, error) {
	b.mu.Lock()
	b.calls++
	b.mu.Unlock()
	if strings.HasPrefix(p.RunID, "gate-") {
		close(b.ch(b.started, p.RunID))
		<-b.ch(b.gates, p.RunID)
	}
	return map[string]string{"runId": p.RunID}, nil
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (b *scriptBackend) Watch(ctx context.Context, p protocol.WatchParams) (*server.Subscription, error) {
	b.mu.Lock()
	b.subCalls++
	b.mu.Unlock()
	return nil, protocol.AppError("TEST", "unexpected watch", nil)
}

func (b *scriptBackend) SubCalls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.subCalls
}

// getReq builds a get request frame with a script tag.
func getReq(id any, tag string) string {
	idj, _ := json.Marshal(id)
	if tag == "" {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"get","params":{}}`, idj)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"get","params":{"atCursor":%q}}`, idj, tag)
}

func cancelReq(id any) string {
	idj, _ := json.Marshal(id)
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":%s}}`, idj)
}

const emptyGet = `"result":{"spec":null,"status":{"phase":"empty","observedGeneration":null,"currentRunId":null,"atCursor":null},"atCursor":null}}`

func getResp(id any) string {
	idj, _ := json.Marshal(id)
	return `{"jsonrpc":"2.0","id":` + string(idj) + `,` + emptyGet
}

func dupResp(id any) string {
	idj, _ := json.Marshal(id)
	return `{"jsonrpc":"2.0","id":` + string(idj) + `,"error":{"code":-32600,"message":"Invalid Request","data":{"code":"DUPLICATE_REQUEST_ID"}}}`
}

func busyResp(id any) string {
	idj, _ := json.Marshal(id)
	return `{"jsonrpc":"2.0","id":` + string(idj) + `,"error":{"code":-32000,"message":"Server busy","data":{"code":"SERVER_BUSY"}}}`
}

// binding starts b behind one binding and returns a connected wire.
type binding struct {
	name  string
	start func(t *testing.T, b server.Backend) wiretest.Wire
}

var bindings = []binding{
	{"ndjson", func(t *testing.T, b server.Backend) wiretest.Wire {
		return wiretest.NewPipe(t, b, wiretest.Options{})
	}},
	{"websocket", func(t *testing.T, b server.Backend) wiretest.Wire {
		return wiretest.NewWSServer(t, b, wiretest.Options{}).Dial(t, nil)
	}},
}

// eachBinding runs test once over every binding, each time with a fresh
// script backend.
func eachBinding(t *testing.T, test func(t *testing.T, b *scriptBackend, w wiretest.Wire)) {
	for _, bd := range bindings {
		t.Run(bd.name, func(t *testing.T) {
			b := newScript()
			test(t, b, bd.start(t, b))
		})
	}
}

// whileGetHeld sends a get for id held at a gate, runs during while it is
// in flight, then opens the gate and expects its answer.
func whileGetHeld(t *testing.T, b *scriptBackend, w wiretest.Wire, id any, during func()) {
	t.Helper()
	send(t, w, getReq(id, "gate:a"))
	testkit.Recv(t, b.Started("gate:a"))
	during()
	b.Open("gate:a")
	expect(t, w, getResp(id))
}

func send(t *testing.T, w wiretest.Wire, frames ...string) {
	t.Helper()
	for _, f := range frames {
		if err := w.Send(f); err != nil {
			t.Fatalf("send %s: %v", f, err)
		}
	}
}

func recv(t *testing.T, w wiretest.Wire) string {
	t.Helper()
	got, err := w.Recv()
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	return got
}

func expect(t *testing.T, w wiretest.Wire, want string) {
	t.Helper()
	if got := recv(t, w); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// roundTrip proves every earlier frame was handled: the reader handles
// frames in order, so the answer to a sync request comes after all inline
// effects of earlier frames.
func roundTrip(t *testing.T, w wiretest.Wire, id string) {
	t.Helper()
	send(t, w, getReq(id, ""))
	expect(t, w, getResp(id))
}
