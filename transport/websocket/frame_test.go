package websocket_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

// sizedGet answers get with a spec string of the current size.
type sizedGet struct {
	server.EmptyBackend
	size atomic.Int64
}

func (b *sizedGet) Get(context.Context, protocol.GetParams) (*protocol.GetResult, error) {
	spec := `"` + strings.Repeat("x", int(b.size.Load())) + `"`
	return &protocol.GetResult{Spec: []byte(spec), Status: protocol.EmptyStatus()}, nil
}

// TestAnswersOfEveryLengthArriveWhole: the binding frames answers itself;
// answers whose frame lengths sit on each side of the 7-bit, 16-bit and
// 64-bit length encodings reach a standard client whole.
func TestAnswersOfEveryLengthArriveWhole(t *testing.T) {
	b := &sizedGet{}
	w := wiretest.NewWSServer(t, b, wiretest.Options{}).Dial(t, nil)
	if err := w.Send(getReq); err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil {
		t.Fatal(err)
	}
	overhead := len(first) // the answer around an empty spec string
	for _, n := range []int{125, 126, 127} {
		// Method not found, with a string id of the length that makes
		// the answer n bytes.
		answer := func(id string) string {
			return `{"jsonrpc":"2.0","id":"` + id + `","error":{"code":-32601,"message":"Method not found"}}`
		}
		id := strings.Repeat("i", n-len(answer("")))
		if err := w.Send(`{"jsonrpc":"2.0","id":"` + id + `","method":"nope","params":{}}`); err != nil {
			t.Fatal(err)
		}
		if got, err := w.Recv(); err != nil || got != answer(id) || len(got) != n {
			t.Fatalf("length %d: got %d bytes, %v", n, len(got), err)
		}
	}
	for _, n := range []int{overhead, 65535, 65536, 65537, 1 << 20} {
		b.size.Store(int64(n - overhead))
		if err := w.Send(getReq); err != nil {
			t.Fatal(err)
		}
		got, err := w.Recv()
		if err != nil {
			t.Fatalf("length %d: %v", n, err)
		}
		want := strings.Replace(first, `"spec":""`, `"spec":"`+strings.Repeat("x", n-overhead)+`"`, 1)
		if len(got) != n || got != want {
			t.Fatalf("length %d: got %d bytes", n, len(got))
		}
	}
}
