package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/internal/testkit"
)

// chanTransport lets a test play the server frame by frame.
type chanTransport struct {
	in     chan []byte // to the client
	out    chan []byte // from the client
	closed chan struct{}
	once   sync.Once
}

func newChanTransport() *chanTransport {
	return &chanTransport{in: make(chan []byte, 16), out: make(chan []byte, 16), closed: make(chan struct{})}
}

func (t *chanTransport) ReadFrame() ([]byte, error) {
	select {
	case b := <-t.in:
		return b, nil
	case <-t.closed:
		return nil, io.EOF
	}
}

func (t *chanTransport) WriteFrame(b []byte) error {
	select {
	case t.out <- append([]byte(nil), b...):
		return nil
	case <-t.closed:
		return io.ErrClosedPipe
	}
}

func (t *chanTransport) Close() error { t.once.Do(func() { close(t.closed) }); return nil }

type wireReq struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      *int64          `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

func next(t *testing.T, tr *chanTransport) wireReq {
	t.Helper()
	b := testkit.Recv(t, tr.out)
	var r wireReq
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("client sent %s: %v", b, err)
	}
	return r
}

// TestIDNullErrorIsLoggedAndIgnored: an id-null error matches no request;
// it is logged and the pending call still gets its own answer.
func TestIDNullErrorIsLoggedAndIgnored(t *testing.T) {
	tr := newChanTransport()
	logs := testkit.NewSyncBuffer()
	c := client.New(tr, client.Options{Log: slog.New(slog.NewTextHandler(logs, nil))})
	defer c.Close()
	errc := make(chan error, 1)
	go func() { _, err := c.Initialize(context.Background()); errc <- err }()
	r := next(t, tr)
	if r.JSONRPC != "2.0" || r.Method != "initialize" || r.ID == nil || string(r.Params) != `{"protocolVersion":"openengine.cluster/v1"}` {
		t.Fatalf("request %+v", r)
	}
	tr.in <- []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`)
	tr.in <- []byte(`{"jsonrpc":"2.0","method":"event","params":{"subscriptionId":"sub-9","cursor":"x"}}`)
	tr.in <- []byte(`{"jsonrpc":"2.0","id":` + itoa(*r.ID) + `,"result":{"protocolVersion":"openengine.cluster/v1","capabilities":{"graphProfiles":[],"logs":false,"agentAttach":false},"status":{"phase":"empty","observedGeneration":null,"currentRunId":null,"atCursor":null}}}`)
	if err := testkit.Recv(t, errc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "matches no request") {
		t.Fatalf("id-null error not logged: %q", logs.String())
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestCancelWireFrames: a cancelled unary call sends $/cancelRequest with
// its id; ids are never reused; a cancelled subscription establishment is
// cancelled with subscription/cancel once its answer arrives.
func TestCancelWireFrames(t *testing.T) {
	tr := newChanTransport()
	c := client.New(tr, client.Options{})
	defer c.Close()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.Get(ctx, client.GetParams{}); errc <- err }()
	r1 := next(t, tr)
	cancel()
	if err := testkit.Recv(t, errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled get: %v", err)
	}
	cr := next(t, tr)
	if cr.Method != "$/cancelRequest" || cr.ID != nil || string(cr.Params) != `{"id":`+itoa(*r1.ID)+`}` {
		t.Fatalf("cancel frame %+v %s", cr, cr.Params)
	}
	// The late answer is dropped; the next call has a fresh id.
	tr.in <- []byte(`{"jsonrpc":"2.0","id":` + itoa(*r1.ID) + `,"result":{}}`)

	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { _, _, err := c.Watch(ctx2, client.WatchParams{RunID: "run-1"}); errc <- err }()
	r2 := next(t, tr)
	if *r2.ID == *r1.ID || r2.Method != "watch" || string(r2.Params) != `{"runId":"run-1"}` {
		t.Fatalf("watch request %+v %s", r2, r2.Params)
	}
	cancel2()
	if err := testkit.Recv(t, errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled watch: %v", err)
	}
	tr.in <- []byte(`{"jsonrpc":"2.0","id":` + itoa(*r2.ID) + `,"result":{"subscriptionId":"sub-7","runId":"run-1","atCursor":null}}`)
	sc := next(t, tr)
	if sc.Method != "subscription/cancel" || string(sc.Params) != `{"subscriptionId":"sub-7"}` {
		t.Fatalf("expected subscription/cancel, got %+v %s", sc, sc.Params)
	}
}
