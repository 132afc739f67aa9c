package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/ops"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
)

// pipeFor serves b on a pipe for identity id, bounded by q.
func pipeFor(t *testing.T, b server.Backend, q *ops.Quotas, id identity.ConnectionIdentity, o server.Options) *wiretest.PipeWire {
	t.Helper()
	lim, ok := q.Open(id)
	if !ok {
		t.Fatalf("connection of %s refused", id.Principal)
	}
	t.Cleanup(lim.Close)
	o.Limits = lim
	return wiretest.NewPipe(t, b, wiretest.Options{Identity: id, Server: o})
}

func get(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"get","params":{}}`, id)
}

// TestThrottledTenantDoesNotRefuseAnother: tenant a exceeds its rate and
// is answered SERVER_BUSY; tenant b's requests, interleaved, within its
// own bucket, are never refused. The buckets' clock stands still, so the
// outcome does not depend on timing.
func TestThrottledTenantDoesNotRefuseAnother(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := ops.NewQuotas(ops.QuotaConfig{RatePerTenant: 5}, func() time.Time { return now })
	a := pipeFor(t, server.EmptyBackend{}, q, identity.ConnectionIdentity{Principal: "pa", Tenant: "a"}, server.Options{})
	a2 := pipeFor(t, server.EmptyBackend{}, q, identity.ConnectionIdentity{Principal: "pa2", Tenant: "a"}, server.Options{})
	b := pipeFor(t, server.EmptyBackend{}, q, identity.ConnectionIdentity{Principal: "pb", Tenant: "b"}, server.Options{})
	busyA := 0
	for i := range 20 {
		w := a
		if i%2 == 1 {
			w = a2 // the bucket is the tenant's, not the connection's
		}
		_ = w.Send(get(i))
		got, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(got, protocol.ServerBusy) {
			busyA++
		}
		if i%4 == 0 {
			_ = b.Send(get(100 + i))
			if got, err := b.Recv(); err != nil || !strings.Contains(got, `"result"`) {
				t.Fatalf("tenant b refused while a is throttled: %s %v", got, err)
			}
		}
	}
	if busyA != 15 {
		t.Fatalf("tenant a: %d of 20 refused, want 15 (burst 5)", busyA)
	}
}

// TestConnectionsPerPrincipal: a principal's connection past the quota is
// refused until one of its connections closes; other principals are not.
func TestConnectionsPerPrincipal(t *testing.T) {
	q := ops.NewQuotas(ops.QuotaConfig{ConnsPerPrincipal: 2}, nil)
	alice := identity.ConnectionIdentity{Principal: "alice", Tenant: "t"}
	l1, ok1 := q.Open(alice)
	_, ok2 := q.Open(alice)
	_, ok3 := q.Open(alice)
	_, okBob := q.Open(identity.ConnectionIdentity{Principal: "bob", Tenant: "t"})
	if !ok1 || !ok2 || ok3 || !okBob {
		t.Fatalf("opens: %v %v %v bob %v; want true true false, bob true", ok1, ok2, ok3, okBob)
	}
	l1.Close()
	l1.Close() // twice is once
	if _, ok := q.Open(alice); !ok {
		t.Fatal("alice refused after closing a connection")
	}
	if _, ok := q.Open(alice); ok {
		t.Fatal("a double Close freed two places")
	}
}

// countingBackend counts the calls that reach it.
type countingBackend struct {
	server.EmptyBackend
	calls atomic.Int64
}

func (b *countingBackend) Initialize(ctx context.Context) (*protocol.InitializeResult, error) {
	b.calls.Add(1)
	return b.EmptyBackend.Initialize(ctx)
}

func (b *countingBackend) Get(ctx context.Context, p protocol.GetParams) (*protocol.GetResult, error) {
	b.calls.Add(1)
	return b.EmptyBackend.Get(ctx, p)
}

// hangingWatch serves watch subscriptions that stay open until cancelled.
type hangingWatch struct{ countingBackend }

type hangingStream struct{}

func (hangingStream) Next(ctx context.Context) (server.Notification, error) {
	<-ctx.Done()
	return server.Notification{}, ctx.Err()
}
func (hangingStream) Close() {}

func (b *hangingWatch) Watch(context.Context, protocol.WatchParams) (*server.Subscription, error) {
	b.calls.Add(1)
	id := fmt.Sprintf("sub-%d", b.calls.Load())
	return &server.Subscription{ID: id, Result: map[string]string{"subscriptionId": id}, Stream: hangingStream{}}, nil
}

// TestSubscriptionsPerTenant: a tenant's subscription past the quota is
// answered SERVER_BUSY without reaching the backend; another tenant's is
// served; a cancelled subscription gives its place back.
func TestSubscriptionsPerTenant(t *testing.T) {
	b := &hangingWatch{}
	q := ops.NewQuotas(ops.QuotaConfig{SubscriptionsPerTenant: 2}, nil)
	a := pipeFor(t, b, q, identity.ConnectionIdentity{Principal: "pa", Tenant: "a"}, server.Options{})
	other := pipeFor(t, b, q, identity.ConnectionIdentity{Principal: "pb", Tenant: "b"}, server.Options{})
	watch := func(w *wiretest.PipeWire, id int) string {
		_ = w.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"watch","params":{}}`, id))
		got, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for i := 1; i <= 2; i++ {
		if got := watch(a, i); !strings.Contains(got, `"result"`) {
			t.Fatalf("watch %d: %s", i, got)
		}
	}
	if got := watch(a, 3); !strings.Contains(got, protocol.ServerBusy) {
		t.Fatalf("third watch of tenant a: %s", got)
	}
	if n := b.calls.Load(); n != 2 {
		t.Fatalf("backend saw %d watches, want 2", n)
	}
	if got := watch(other, 1); !strings.Contains(got, `"result"`) {
		t.Fatalf("tenant b's watch: %s", got)
	}
	_ = a.Send(`{"jsonrpc":"2.0","method":"subscription/cancel","params":{"subscriptionId":"sub-1"}}`)
	// The cancel is applied before the next frame is read, but the place
	// is given back when the subscription's goroutine has ended: retry
	// until it has.
	for id := 4; ; id++ {
		got := watch(a, id)
		if strings.Contains(got, `"result"`) {
			break
		}
		if id > 1000 {
			t.Fatalf("the cancelled subscription's place never came back: %s", got)
		}
	}
}

// TestReadiness: 200 while the store answers, 503 once it is closed or
// the server drains; the body says which.
func TestReadiness(t *testing.T) {
	st := store.NewMemory()
	r := &ops.Readiness{Store: st}
	probe := func() (int, string) {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := probe(); code != 200 || body != "ready\n" {
		t.Fatalf("open store: %d %q", code, body)
	}
	_ = st.Close()
	if code, body := probe(); code != 503 || !strings.Contains(body, "store") {
		t.Fatalf("closed store: %d %q", code, body)
	}
	r2 := &ops.Readiness{}
	r2.Drain()
	rec := httptest.NewRecorder()
	r2.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "draining") {
		t.Fatalf("draining: %d %q", rec.Code, rec.Body.String())
	}
}

// TestAccessLog: one line per mutation (method, tenant, run, outcome,
// duration) and one per connection (principal, tenant, remote, binding,
// duration, frames, reason); no param value but ids, never a token.
func TestAccessLog(t *testing.T) {
	var logs logSink
	al := ops.AccessLog{Log: slog.New(slog.NewJSONHandler(&logs, nil))}
	id := identity.ConnectionIdentity{Principal: "alice", Tenant: "acme"}
	w := wiretest.NewPipe(t, server.EmptyBackend{}, wiretest.Options{Identity: id, Server: server.Options{Observer: al, Peer: "10.0.0.1:5555", Binding: "ndjson"}})
	for _, f := range []string{
		get(1),
		`{"jsonrpc":"2.0","id":2,"method":"run/force","params":{"runId":"night-build.7","reason":"secret reason text"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"stop","params":{"mode":"force","ifGeneration":1,"idempotencyKey":"secret-key"}}`,
	} {
		_ = w.Send(f)
		if _, err := w.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 {
		t.Fatalf("log lines:\n%s", logs.String())
	}
	want := []map[string]any{
		{"msg": "mutation", "method": "run/force", "tenant": "acme", "run": "night-build.7", "outcome": "SCHEMA_VIOLATION"},
		{"msg": "mutation", "method": "stop", "tenant": "acme", "outcome": "INVALID_PHASE"},
		{"msg": "connection", "principal": "alice", "tenant": "acme", "remote": "10.0.0.1:5555", "binding": "ndjson", "framesIn": 3.0, "framesOut": 3.0, "reason": "normal"},
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, lines[i][k], v)
			}
		}
		if _, ok := lines[i]["duration"]; !ok {
			t.Errorf("line %d has no duration", i)
		}
	}
	if s := logs.String(); strings.Contains(s, "secret") {
		t.Fatalf("a param value reached the access log:\n%s", s)
	}
}
