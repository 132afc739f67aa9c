package collectortest_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/internal/agenttest"
	"github.com/oecp/oecp/internal/collectortest"
	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/store/postgres/pgtest"
	"github.com/oecp/oecp/tracing"
)

// replicaAttr is the resource attribute that names the replica a span
// came from.
const replicaAttr = "oecp.test.replica"

// replicaSet is the configuration `oecp serve` replicas share: one fresh
// PostgreSQL schema, the fake codex, acme/app with the example fake forge.
type replicaSet struct {
	bin  string
	args []string
}

func newReplicaSet(t *testing.T, dsn, cli string, remote *gittest.Remote) *replicaSet {
	t.Helper()
	dir := t.TempDir()
	bin, err := wiretest.BuildBinary(dir)
	if err != nil {
		t.Fatal(err)
	}
	harness := testkit.WriteJSON(t, dir, "harness.json", map[string]any{"codex": map[string]any{"argv": []string{cli}, "env": []string{"OPENAI_API_KEY"}}})
	repos := testkit.WriteJSON(t, dir, "repos.json", agenttest.ReposFile(t, remote.Dir))
	return &replicaSet{bin: bin, args: []string{"--store", "postgres", "--dsn", dsn, "--lease-ttl", "1s", "--pg-pool", "4",
		"--harness", harness, "--repos", repos,
		// The fake agent waits on a FIFO in the test's temporary directory,
		// which the agent sandbox hides; what this test checks is the trace
		// of a takeover, not the confinement.
		"--agent-unconfined"}}
}

// start runs one replica, with a data directory of its own, exporting
// its spans to endpoint over protocol (queued spans leave within 50 ms)
// with its name as replicaAttr.
func (rs *replicaSet) start(t *testing.T, name, endpoint, protocol string) *wiretest.Server {
	t.Helper()
	log := testkit.NewSyncBuffer()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica %s:\n%s", name, log.String())
		}
	})
	return wiretest.StartServerEnv(t, rs.bin, log, []string{"OTEL_BSP_SCHEDULE_DELAY=50"}, append(rs.args, "--data", t.TempDir(),
		"--trace-endpoint", endpoint, "--trace-protocol", protocol, "--trace-resource-attributes", replicaAttr+"="+name)...)
}

// gate is a first agent turn that reports its pid on the FIFO started and
// then waits for a line on a FIFO nobody writes: it ends only when the
// test's cleanup kills its process group.
func gate(t *testing.T) (action, started string) {
	t.Helper()
	ctl := t.TempDir()
	started, wait := filepath.Join(ctl, "started"), filepath.Join(ctl, "wait")
	for _, f := range []string{started, wait} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return "echo $$ > '" + started + "'\nread -r line < '" + wait + "'\n", started
}

// agentStarted waits for the gated turn's pid on the FIFO started.
func agentStarted(t *testing.T, started string) {
	t.Helper()
	line := make(chan string, 1)
	go func() {
		// Opening a FIFO blocks until the agent opens it too: a test that
		// fails first leaves this goroutine to the process's end.
		f, err := os.Open(started)
		if err != nil {
			line <- err.Error()
			return
		}
		defer f.Close()
		l, _ := bufio.NewReader(f).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		pid, err := strconv.Atoi(strings.TrimSpace(l))
		if err != nil {
			t.Fatalf("the gated agent reported %q", l)
		}
		t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	case <-time.After(testkit.HangGuard):
		t.Fatal("the agent's first turn never started")
	}
}

// waitForSpans waits until the collector holds spans that ok accepts.
func waitForSpans(t *testing.T, col *collectortest.Collector, what string, ok func([]collectortest.Span) bool) {
	t.Helper()
	guard := time.After(testkit.HangGuard)
	for !ok(col.Spans()) {
		select {
		case <-guard:
			t.Fatalf("the collector never received %s; it has %v", what, names(col.Spans()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestRunMovedBetweenReplicasIsOneTrace: a native run is submitted, by a
// caller that sent a traceparent, to replica a (the only one then, so it
// runs the run) of two `oecp serve` replicas on one PostgreSQL database.
// While the agent's first turn runs, replica b starts and a is killed
// (SIGKILL); b takes the run over, runs the step again and delivers. The
// Collector's OTLP receiver gets a's spans over gRPC and b's over HTTP, and
// they make one trace: every span of the run, from either replica, has the
// run's trace id; there is one root span `run`, emitted by b, ending with
// the run's status and starting at the run's creation (its id's time), not
// at the takeover; the rerun step's span and the delivery's are its
// children.
func TestRunMovedBetweenReplicasIsOneTrace(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	t.Setenv("OPENAI_API_KEY", "sk-test-secret")
	col := collectortest.Start(t)
	action, started := gate(t)
	remote := gittest.NewRemote(t)
	rs := newReplicaSet(t, dsn, replayingCLI(t, action, editNotes), remote)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.HangGuard)
	defer cancel()

	a := rs.start(t, "a", col.GRPC, tracing.ProtocolGRPC)
	conn, err := client.Dial(ctx, a.URL, client.DialOptions{AllowPlaintext: true, Traceparent: callerTraceparent})
	if err != nil {
		t.Fatal(err)
	}
	id := client.NewRunID()
	if err := conn.Call(ctx, "run/submit", twoNodesSubmit(t, id, remote.Head()), nil); err != nil {
		t.Fatalf("run/submit: %v", err)
	}
	_ = conn.Close()
	agentStarted(t, started)
	// What a exported before it dies: its run/submit and the workspace it
	// prepared for the step.
	waitForSpans(t, col, "replica a's run/submit and workspace prepare", func(spans []collectortest.Span) bool {
		return fromReplica(spans, "a", "run/submit") != nil && fromReplica(spans, "a", "workspace prepare") != nil
	})

	b := rs.start(t, "b", col.HTTP, tracing.ProtocolHTTP)
	_ = a.Signal(t, syscall.SIGKILL)
	if got := follow(ctx, t, b.URL, id); got != "succeeded" {
		t.Fatalf("the run ended %q on replica b", got)
	}
	// A stopping server exports what it still holds.
	_ = b.Signal(t, syscall.SIGTERM)
	created, ok := client.RunIDTime(id)
	if !ok {
		t.Fatalf("run id %q has no time", id)
	}
	checkMovedTrace(t, col.Spans(), id, created)
}

// follow watches run id on url to its end and returns its terminal
// status.
func follow(ctx context.Context, t *testing.T, url, id string) string {
	t.Helper()
	conn, err := client.Dial(ctx, url, client.DialOptions{AllowPlaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sub, _, err := conn.RunWatch(ctx, client.RunWatchParams{RunID: id})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for ev := range sub.Events() {
		if ev.Status.Phase == "finished" && ev.Status.TerminalResult != nil {
			return ev.Status.TerminalResult.Status
		}
	}
	t.Fatalf("the watch on replica b ended: %v", sub.Err())
	return ""
}

// fromReplica is the first span named name from replica, or nil.
func fromReplica(spans []collectortest.Span, replica, name string) *collectortest.Span {
	for i, s := range spans {
		if s.Name == name && s.Resource[replicaAttr] == replica {
			return &spans[i]
		}
	}
	return nil
}

func checkMovedTrace(t *testing.T, spans []collectortest.Span, id string, created time.Time) {
	t.Helper()
	var roots []collectortest.Span
	for _, s := range spans {
		if s.Name == tracing.RootSpanName {
			roots = append(roots, s)
		}
	}
	if len(roots) != 1 {
		t.Fatalf("%d root spans among %v", len(roots), names(spans))
	}
	root := roots[0]
	if root.Parent != "" || root.Resource[replicaAttr] != "b" || root.Error ||
		root.Attrs["oecp.run.id"] != id || root.Attrs["oecp.run.status"] != "succeeded" || root.Attrs["oecp.run.resumed"] != "true" {
		t.Errorf("root %+v is not replica b's root of the succeeded run %s", root, id)
	}
	if root.Start.After(created) || root.End.Before(root.Start) {
		t.Errorf("root spans %v to %v; the run was created at %v", root.Start, root.End, created)
	}
	under := func(replica, child string, parent *collectortest.Span) *collectortest.Span {
		t.Helper()
		s := fromReplica(spans, replica, child)
		if s == nil {
			t.Errorf("no %q from replica %s", child, replica)
			return &collectortest.Span{Name: child}
		}
		if parent != nil && (s.TraceID != parent.TraceID || s.Parent != parent.SpanID) {
			t.Errorf("%q from replica %s (trace %s, parent %s) is not under %q (trace %s, span %s)",
				child, replica, s.TraceID, s.Parent, parent.Name, parent.TraceID, parent.SpanID)
		}
		return s
	}
	under("a", "workspace prepare", &root)
	under("b", "workspace restore", &root)
	// The killed replica's step span never ended, so it was never
	// exported (the spans it had ended under it, such as its sandbox's
	// start, name a parent the collector never gets): the one step span is
	// the rerun's, on b.
	if s := fromReplica(spans, "a", "step write"); s != nil {
		t.Errorf("the killed replica exported its step's span: %+v", s)
	}
	write := under("b", "step write", &root)
	under("b", "verifier deliver", &root)
	turn := under("b", "invoke_agent write", write)
	if turn.Attrs["gen_ai.conversation.id"] != "th-traced" || turn.Attrs["gen_ai.usage.input_tokens"] != "1000" {
		t.Errorf("the rerun's turn %+v", turn)
	}
	perReplica := map[string]int{}
	for _, s := range spans {
		if s.Attrs["rpc.system"] != "" {
			continue // a request's span is in its caller's trace
		}
		if s.TraceID != root.TraceID {
			t.Errorf("%q from replica %s is in trace %s, not the run's %s", s.Name, s.Resource[replicaAttr], s.TraceID, root.TraceID)
		}
		perReplica[s.Resource[replicaAttr]]++
	}
	if perReplica["a"] == 0 || perReplica["b"] == 0 {
		t.Errorf("spans of the run per replica: %v", perReplica)
	}
	if t.Failed() {
		for _, s := range spans {
			t.Logf("%s from %s: trace %s span %s parent %s, %v to %v, %v", s.Name, s.Resource[replicaAttr], s.TraceID, s.SpanID, s.Parent, s.Start, s.End, s.Attrs)
		}
	}
}
