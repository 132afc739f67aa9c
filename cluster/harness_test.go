package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/transport/ndjson"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// goldenDir holds the reference goldens (testdata/oecp-v1).
var goldenDir = filepath.Join("..", "testdata", "oecp-v1", "goldens")

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Skipf("golden %s not available: %v", name, err)
	}
	return data
}

// goldenPairs splits an NDJSON golden into (request, response) lines.
func goldenPairs(t *testing.T, name string) [][2]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(string(readGolden(t, name)), "\n"), "\n")
	if len(lines)%2 != 0 {
		t.Fatalf("%s: odd number of lines", name)
	}
	var out [][2]string
	for i := 0; i < len(lines); i += 2 {
		out = append(out, [2]string{lines[i], lines[i+1]})
	}
	return out
}

// wire is one in-process connection: a real server.Conn over an NDJSON
// pipe.
type wire struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan struct{}
}

func dial(t *testing.T, b server.Backend, id identity.ConnectionIdentity) *wire {
	t.Helper()
	return dialWith(t, b, id, server.Options{})
}

func dialWith(t *testing.T, b server.Backend, id identity.ConnectionIdentity, opts server.Options) *wire {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := server.NewConn(&server.Dispatcher{Backend: b}, ndjson.New(inR, outW, io.Discard), id, opts)
	w := &wire{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan struct{})}
	go func() {
		c.Serve(context.Background())
		_ = outW.Close()
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		select {
		case <-w.done:
		case <-time.After(testkit.HangGuard):
			t.Errorf("the connection did not end within %v of its input's end", testkit.HangGuard)
		}
	})
	return w
}

func (w *wire) send(line string) {
	w.t.Helper()
	if _, err := io.WriteString(w.in, line+"\n"); err != nil {
		w.t.Fatalf("write: %v", err)
	}
}

func (w *wire) recv() string {
	w.t.Helper()
	line, err := w.out.ReadString('\n')
	if err != nil {
		w.t.Fatalf("read: %v", err)
	}
	return strings.TrimSuffix(line, "\n")
}

// call sends one request line and returns the next frame.
func (w *wire) call(line string) string {
	w.t.Helper()
	w.send(line)
	return w.recv()
}

// replayGolden replays an NDJSON golden byte for byte on w.
func replayGolden(t *testing.T, w *wire, name string) {
	t.Helper()
	for i, p := range goldenPairs(t, name) {
		if got := w.call(p[0]); got != p[1] {
			t.Fatalf("%s pair %d:\nrequest %s\n got    %s\n want   %s", name, i, p[0], got, p[1])
		}
	}
}

// goldenGraph is the fixture graph every golden uses.
const goldenGraph = `{"profile":"openengine.graph.single-worker/v1","initialInput":{"kind":"null"},"policy":{"policy":"policy.default@1","default":"deny"},"root":{"kind":"step","name":"worker","worker":"legacy.zeroshot.ship@1","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":1000,"attempts":1}}`

// graphWith returns the fixture graph with another timeout (a changed
// identity).
func graphWith(timeout int) string {
	return strings.Replace(goldenGraph, `"timeoutMs":1000`, `"timeoutMs":`+itoa(timeout), 1)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// ctxFor returns a context carrying a connection identity of tenant.
func ctxFor(tenant string) context.Context {
	return identity.With(context.Background(), identity.ConnectionIdentity{Principal: tenant, Tenant: tenant})
}

func ptr[T any](v T) *T { return &v }

// apply commits the fixture graph (or g) with input null.
func applyP(g, key string, ifGen *int64) protocol.ApplyParams {
	return protocol.ApplyParams{Graph: json.RawMessage(g), Input: protocol.Null, HasInput: true, IfGeneration: ifGen, IdempotencyKey: &key}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := protocol.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// errCode returns the wire data.code of err ("" when none).
func errCode(err error) string {
	if pe, ok := err.(*protocol.Error); ok {
		return pe.DataCode
	}
	return ""
}

func errDetails(err error) string {
	if pe, ok := err.(*protocol.Error); ok {
		return string(pe.Details)
	}
	return ""
}

func expectCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want %s", code)
	}
	if got := errCode(err); got != code {
		t.Fatalf("got %v (%s), want %s", err, got, code)
	}
}

// nextN reads n notifications from a stream.
func nextN(t *testing.T, s server.Stream, n int) []server.Notification {
	t.Helper()
	out := make([]server.Notification, 0, n)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.HangGuard)
	defer cancel()
	for range n {
		x, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, x)
	}
	return out
}

// eventParams rebuilds the params of an event notification for sub.
func eventParams(sub string, n server.Notification) []byte {
	b := protocol.AppendString([]byte(`{"subscriptionId":`), sub)
	b = append(b, n.Rest...)
	return append(b, '}')
}

// sameJSON compares two JSON documents as values.
func sameJSON(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("bad JSON %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("bad JSON %s: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return bytes.Equal(gb, wb)
}

// engineRun drives one running run through the engine's ledger, the way
// the supervisor does: dispatch, settle, hold, crash.
type engineRun struct {
	t    testing.TB
	l    *cluster.Ledger
	ref  engine.RunRef
	next uint64 // the next execution number
}

// drive claims tenant's running run of b for a test supervisor.
func drive(t testing.TB, b *cluster.Backend, tenant string) *engineRun {
	t.Helper()
	l := b.Ledger("test-supervisor")
	runs, err := l.Running(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range runs {
		if ref.Tenant != b.TenantKey(tenant) {
			continue
		}
		if err := l.Claim(bg, ref); err != nil {
			t.Fatal(err)
		}
		snap, err := l.Snapshot(bg, ref)
		if err != nil {
			t.Fatal(err)
		}
		return &engineRun{t: t, l: l, ref: ref, next: uint64(len(snap.History.Ended)+len(snap.History.Executions)) + 1}
	}
	t.Fatalf("tenant %q has no running run", tenant)
	return nil
}

// dispatch records the next execution of node (attempt 1) with input,
// and returns its number.
func (r *engineRun) dispatch(node string, input protocol.Value) (uint64, error) {
	x := r.next
	d := engine.Dispatch{
		Dispatch: reduce.Dispatch{NodeInstance: x, Execution: x, Occurrence: reduce.Occurrence{Node: node}, Attempt: 1, Input: json.RawMessage(input)},
		Ref:      engine.ExecutionRef(r.ref.RunID, node, int(x)),
	}
	if err := r.l.Dispatch(bg, r.ref, []engine.Dispatch{d}); err != nil {
		return 0, err
	}
	r.next++
	return x, nil
}

// mustDispatch is dispatch of worker with input null, failing the test on
// an error.
func (r *engineRun) mustDispatch() uint64 {
	r.t.Helper()
	x, err := r.dispatch("worker", protocol.Null)
	if err != nil {
		r.t.Fatal(err)
	}
	return x
}

func (r *engineRun) settle(x uint64, o worker.Outcome) error {
	return r.l.Settle(bg, r.ref, []engine.Settlement{{Execution: x, Outcome: o}})
}

func (r *engineRun) succeed(x uint64) error {
	return r.settle(x, worker.Outcome{Status: "verified", Output: json.RawMessage("null")})
}

func (r *engineRun) fail(x uint64) error {
	return r.settle(x, worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure))
}

// hold holds the run on execution x: x becomes the retry frontier.
func (r *engineRun) hold(x uint64) error {
	return r.l.Hold(bg, r.ref, reduce.Hold{Execution: x})
}

func (r *engineRun) crash(x uint64) error {
	return r.l.Crash(bg, r.ref, []uint64{x})
}

// failAndHold fails execution x and holds the run on it.
func (r *engineRun) failAndHold(x uint64) {
	r.t.Helper()
	if err := r.fail(x); err != nil {
		r.t.Fatal(err)
	}
	if err := r.hold(x); err != nil {
		r.t.Fatal(err)
	}
}
