package ndjson_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/transport/ndjson"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const (
	getReq   = `{"jsonrpc":"2.0","id":1,"method":"get","params":{}}`
	getResp  = `{"jsonrpc":"2.0","id":1,"result":{"spec":null,"status":{"phase":"empty","observedGeneration":null,"currentRunId":null,"atCursor":null},"atCursor":null}}`
	parseErr = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`
)

// serve runs one NDJSON connection over in-memory input to completion.
func serve(t *testing.T, b server.Backend, id identity.ConnectionIdentity, opts server.Options, input string) (out, diag string) {
	t.Helper()
	return serveWith(t, &server.Dispatcher{Backend: b}, id, opts, input)
}

func serveWith(t *testing.T, disp *server.Dispatcher, id identity.ConnectionIdentity, opts server.Options, input string) (out, diag string) {
	t.Helper()
	var o, d bytes.Buffer
	if err := ndjson.Serve(context.Background(), disp, strings.NewReader(input), &o, &d, id, opts); err != nil {
		t.Fatal(err)
	}
	return o.String(), d.String()
}

func TestOversizedAndMalformedLinesAreDeterministic(t *testing.T) {
	in := strings.Repeat("x", 1<<20+16) + "\nnot valid json\n" + getReq + "\n"
	out, _ := serve(t, server.EmptyBackend{}, identity.Local(), server.Options{}, in)
	want := parseErr + "\n" + parseErr + "\n" + getResp + "\n"
	if out != want {
		t.Fatalf("got %q", out)
	}
}

func TestLineBoundIsInclusiveAndCRCounts(t *testing.T) {
	exact := getReq + strings.Repeat(" ", 1<<20-len(getReq))
	crOver := getReq + strings.Repeat(" ", 1<<20-len(getReq)) + "\r"
	crrOK := getReq + strings.Repeat(" ", 1<<20-len(getReq)-1) + "\r"
	// The gets are answered in place by the reader, so the three answers
	// come in line order. Served on their own goroutines, a get's answer
	// could be overtaken by the parse error of the next line: answers to
	// different requests go out in completion order.
	d := &server.Dispatcher{Backend: server.EmptyBackend{}, InlineReads: true}
	out, _ := serveWith(t, d, identity.Local(), server.Options{}, exact+"\n"+crOver+"\n"+crrOK+"\n")
	want := getResp + "\n" + parseErr + "\n" + getResp + "\n"
	if out != want {
		t.Fatalf("got %q", out)
	}
}

func TestFinalLineWithoutNewlineIsServed(t *testing.T) {
	out, _ := serve(t, server.EmptyBackend{}, identity.Local(), server.Options{}, getReq)
	if out != getResp+"\n" {
		t.Fatalf("got %q", out)
	}
}

func TestInvalidUTF8EndsWithOneDiagnostic(t *testing.T) {
	out, diag := serve(t, server.EmptyBackend{}, identity.Local(), server.Options{}, "{\"a\":\"\xff\"}\n"+getReq+"\n")
	if out != "" || !strings.HasPrefix(diag, "cluster protocol input error: ") || strings.Count(diag, "\n") != 1 {
		t.Fatalf("out %q diag %q", out, diag)
	}
}

type countingBackend struct {
	server.EmptyBackend
	calls int
}

func (b *countingBackend) Get(ctx context.Context, p protocol.GetParams) (*protocol.GetResult, error) {
	b.calls++
	return b.EmptyBackend.Get(ctx, p)
}

func TestExpiryEmitsOneTerminalDiagnosticAndCloses(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &countingBackend{}
	id := identity.ConnectionIdentity{Principal: "p", Tenant: "t", ExpiresAt: now}
	out, diag := serve(t, b, id, server.Options{Now: func() time.Time { return now }}, getReq+"\n")
	if out != "" || diag != ndjson.DiagExpired || b.calls != 0 {
		t.Fatalf("out %q diag %q calls %d", out, diag, b.calls)
	}
}

// TestIdleConnectionExpiresOnTime: with no input at all, the expiry timer
// ends the connection with the one diagnostic (fake time via synctest).
func TestIdleConnectionExpiresOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inR, inW := io.Pipe()
		defer inW.Close()
		var out, diag bytes.Buffer
		id := identity.ConnectionIdentity{Principal: "p", Tenant: "t", ExpiresAt: time.Now().Add(time.Hour)}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = ndjson.Serve(context.Background(), &server.Dispatcher{Backend: server.EmptyBackend{}}, inR, &out, &diag, id, server.Options{})
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("ended before expiry")
		default:
		}
		time.Sleep(time.Hour)
		<-done
		if diag.String() != ndjson.DiagExpired || out.Len() != 0 {
			t.Fatalf("out %q diag %q", out.String(), diag.String())
		}
	})
}

// TestEOFIsAHalfClose: requests written before EOF are answered even if
// they are still running when stdin closes.
func TestEOFIsAHalfClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out, diag bytes.Buffer
		d := &server.Dispatcher{Backend: server.EmptyBackend{}, FaultDelay: map[string]time.Duration{"get": time.Second}}
		in := getReq + "\n" + strings.Replace(getReq, `"id":1`, `"id":2`, 1) + "\n"
		if err := ndjson.Serve(context.Background(), d, strings.NewReader(in), &out, &diag, identity.Local(), server.Options{}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != 2 {
			t.Fatalf("got %q", out.String())
		}
	})
}
