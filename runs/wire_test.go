package runs_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
	"github.com/oecp/oecp/store/sqlite"
)

// wireBackend serves the v1 methods from a fixture cluster and run/* from
// the native backend, the way the capsule composes them.
type wireBackend struct {
	*cluster.Backend
	rb *runs.Backend
}

func (w wireBackend) RunUnary(ctx context.Context, m string, p protocol.RunParams) (any, error) {
	return w.rb.RunUnary(ctx, m, p)
}

func (w wireBackend) RunSubscribe(ctx context.Context, m string, p protocol.RunParams) (*server.Subscription, error) {
	return w.rb.RunSubscribe(ctx, m, p)
}

// schemas validates frames against the pack's schemas: schema.json and
// native-v2-observation.schema.json, by message name (their top-level
// properties).
type schemas struct {
	c     *jsonschema.Compiler
	cache map[string]*jsonschema.Schema
}

func loadSchemas(t *testing.T) *schemas {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.UseRegexpEngine(ecmaRegexp)
	for _, name := range []string{"schema.json", "native-v2-observation.schema.json"} {
		f, err := os.Open(filepath.Join(wiretest.PackDir(), name))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource("file:///"+name, doc); err != nil {
			t.Fatal(err)
		}
	}
	return &schemas{c: c, cache: map[string]*jsonschema.Schema{}}
}

// uEscape is an ECMA-262 \uXXXX escape, which Go's regexp spells \x{XXXX}.
var uEscape = regexp.MustCompile(`\\u([0-9A-Fa-f]{4})`)

// lookahead is the one ECMA-262 lookahead the schemas use: a pattern
// `^(?!word$)rest` that excludes one literal.
var lookahead = regexp.MustCompile(`^\^\(\?!([A-Za-z_]+)\$\)(.*)$`)

// ecmaRegexp compiles the schemas' patterns, which use \u escapes and an
// excluding lookahead, with Go's regexp.
func ecmaRegexp(s string) (jsonschema.Regexp, error) {
	src := uEscape.ReplaceAllString(s, `\x{$1}`)
	if m := lookahead.FindStringSubmatch(src); m != nil {
		re, err := regexp.Compile("^" + m[2])
		return excluding{re: re, word: m[1], src: s}, err
	}
	return regexp.Compile(src)
}

type excluding struct {
	re   *regexp.Regexp
	word string
	src  string
}

func (e excluding) MatchString(s string) bool { return s != e.word && e.re.MatchString(s) }
func (e excluding) String() string            { return e.src }

// validate validates frame against message msg of schema file.
func (s *schemas) validate(file, msg, frame string) error {
	url := "file:///" + file + "#/properties/" + msg
	sch, ok := s.cache[url]
	if !ok {
		var err error
		if sch, err = s.c.Compile(url); err != nil {
			return fmt.Errorf("compile %s: %w", url, err)
		}
		s.cache[url] = sch
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(frame))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

func (s *schemas) check(t *testing.T, file, msg, frame string) {
	t.Helper()
	if err := s.validate(file, msg, frame); err != nil {
		t.Fatalf("%s does not validate as %s/%s: %v", frame, file, msg, err)
	}
}

// messages names a run method's messages: schema.json's, then
// native-v2-observation.schema.json's ("" where it has none); events are
// the subscription methods' event notifications.
var messages = map[string][2]string{
	"run/submit": {"run_submit_response"}, "run/list": {"run_list_response"},
	"run/status": {"run_status_response", "status_response"}, "run/force": {"run_force_response", "force_response"},
	"run/watch": {"run_watch_response", "watch_response"}, "run/logs": {"run_logs_response", "logs_response"},
	"run/attach":       {"run_attach_response", "attach_response"},
	"run/watch event":  {"run_watch_event_notification", "watch_event_notification"},
	"run/logs event":   {"run_log_event_notification", "log_event_notification"},
	"run/attach event": {"run_attach_event_notification", "attach_event_notification"},
}

// session is one client connection whose every frame is validated: a
// response against its method's response message, a notification against
// its subscription's event (or the closed) message.
type session struct {
	t    *testing.T
	w    wiretest.Wire
	s    *schemas
	next int
	subs map[string]string           // subscription id -> method
	got  map[string][]map[string]any // subscription id -> events and the close
}

// validate checks frame as message key of messages.
func (c *session) validate(key, frame string) {
	names, ok := messages[key]
	if !ok {
		c.t.Fatalf("no schema message for %s", key)
	}
	c.s.check(c.t, "schema.json", names[0], frame)
	if names[1] != "" {
		c.s.check(c.t, "native-v2-observation.schema.json", names[1], frame)
	}
}

// call sends a request and reads frames until its response, validating
// every frame on the way; it returns the response's result or error.
func (c *session) call(method string, params string) (result, rpcErr map[string]any) {
	c.t.Helper()
	c.next++
	if err := c.w.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.next, method, params)); err != nil {
		c.t.Fatal(err)
	}
	for {
		frame := c.recv()
		var m map[string]any
		_ = json.Unmarshal([]byte(frame), &m)
		if m["method"] != nil {
			c.notification(m, frame)
			continue
		}
		if m["id"] != float64(c.next) {
			c.t.Fatalf("unexpected frame %s", frame)
		}
		c.validate(method, frame)
		res, _ := m["result"].(map[string]any)
		e, _ := m["error"].(map[string]any)
		if id, ok := res["subscriptionId"].(string); ok {
			c.subs[id] = method
		}
		return res, e
	}
}

func (c *session) recv() string {
	c.t.Helper()
	frame, err := c.w.Recv()
	if err != nil {
		c.t.Fatalf("recv: %v", err)
	}
	return frame
}

func (c *session) notification(m map[string]any, frame string) {
	params := m["params"].(map[string]any)
	id := params["subscriptionId"].(string)
	if m["method"] == "subscription/closed" {
		c.s.check(c.t, "schema.json", "subscription_closed_notification", frame)
	} else {
		c.validate(c.subs[id]+" event", frame)
	}
	c.got[id] = append(c.got[id], params)
}

// until reads frames until subscription id has closed and returns its
// events and the close.
func (c *session) until(id string) []map[string]any {
	c.t.Helper()
	for {
		if evs := c.got[id]; len(evs) > 0 && evs[len(evs)-1]["reason"] != nil {
			return evs
		}
		var m map[string]any
		frame := c.recv()
		_ = json.Unmarshal([]byte(frame), &m)
		if m["method"] == nil {
			c.t.Fatalf("unexpected response %s", frame)
		}
		c.notification(m, frame)
	}
}

func dataCode(e map[string]any) string {
	d, _ := e["data"].(map[string]any)
	s, _ := d["code"].(string)
	return s
}

// TestRunFramesMatchTheSchemas drives every run/* method over NDJSON and
// WebSocket — results, events, closes and errors — and validates each
// frame the server writes against schema.json and, for the observation
// methods, native-v2-observation.schema.json.
func TestRunFramesMatchTheSchemas(t *testing.T) {
	s := loadSchemas(t)
	for _, bad := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"runId":"r","title":"t","source":{"repository":"a/b","branch":"main","revision":"0123456789abcdef0123456789abcdef01234567"},"size":"small","atCursor":"v2:1","status":{"phase":"running"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"runId":"r","title":"t","source":{"repository":"a/b","branch":"main","revision":"0123456789abcdef0123456789abcdef01234567"},"size":"huge","atCursor":"v2:1","status":{"phase":"admitted"}}}`,
	} {
		if s.validate("schema.json", "run_status_response", bad) == nil {
			t.Fatalf("the schema accepts %s", bad)
		}
	}
	for _, binding := range []string{"ndjson", "websocket"} {
		t.Run(binding, func(t *testing.T) {
			r := newRig(t, nil, 0)
			b := wireBackend{Backend: cluster.NewFixture(cluster.Isolated), rb: r.b}
			var w wiretest.Wire
			if binding == "ndjson" {
				w = wiretest.NewPipe(t, b, wiretest.Options{})
			} else {
				w = wiretest.NewWSServer(t, b, wiretest.Options{}).Dial(t, nil)
			}
			c := &session{t: t, w: w, s: s, subs: map[string]string{}, got: map[string][]map[string]any{}}
			runFrames(t, c, r)
		})
	}
}

func runFrames(t *testing.T, c *session, r *rig) {
	sub := func(key, instr string) string {
		return fmt.Sprintf(`{"runId":%q,"submission":%s}`, key, oneStep(key, instr))
	}
	if res, e := c.call("run/submit", sub("done", "log:2")); e != nil || res["runId"] != "done" {
		t.Fatalf("submit: %v %v", res, e)
	}
	w, _ := c.call("run/watch", `{"runId":"done"}`)
	if evs := c.until(w["subscriptionId"].(string)); evs[len(evs)-1]["reason"] != "done" || evs[len(evs)-1]["lastDeliveredCursor"] == nil {
		t.Fatalf("watch: %v", evs)
	}
	l, _ := c.call("run/logs", `{"runId":"done","fromCursor":null}`)
	if evs := c.until(l["subscriptionId"].(string)); len(evs) != 3 {
		t.Fatalf("logs: %v", evs)
	}
	if res, e := c.call("run/status", `{"runId":"done"}`); e != nil || res["status"].(map[string]any)["phase"] != "finished" {
		t.Fatalf("status: %v %v", res, e)
	}
	if _, e := c.call("run/submit", sub("blocked", "block")); e != nil {
		t.Fatal(e)
	}
	ref := testkit.Recv(t, r.agents.started)
	a, e := c.call("run/attach", fmt.Sprintf(`{"runId":"blocked","execution":%q}`, ref))
	if e != nil {
		t.Fatal(e)
	}
	if res, e := c.call("run/force", `{"runId":"blocked"}`); e != nil || res["status"].(map[string]any)["phase"] != "stopping" {
		t.Fatalf("force: %v %v", res, e)
	}
	if evs := c.until(a["subscriptionId"].(string)); evs[len(evs)-1]["reason"] != "done" {
		t.Fatalf("attach: %v", evs)
	}
	waitFinished(t, r.b, as("local"), "blocked")
	if res, e := c.call("run/list", `{}`); e != nil || len(res["runs"].([]any)) != 2 {
		t.Fatalf("list: %v %v", res, e)
	}
	errs := []struct{ method, params, code string }{
		{"run/attach", fmt.Sprintf(`{"runId":"blocked","execution":%q}`, ref), protocol.Gone},
		{"run/attach", `{"runId":"blocked","execution":"nope"}`, protocol.NotFound},
		{"run/status", `{"runId":"nope"}`, protocol.NotFound},
		{"run/force", `{"runId":"nope"}`, protocol.NotFound},
		{"run/watch", `{"runId":"nope"}`, protocol.NotFound},
		{"run/logs", `{"runId":"done","fromCursor":"v2:999"}`, protocol.InvalidPhase},
		{"run/submit", sub("run-3", "echo"), protocol.SchemaViolation},
		{"run/submit", sub("done", "fail"), protocol.RunConflict},
		{"run/submit", fmt.Sprintf(`{"runId":"again","submission":%s}`, oneStep("done", "fail")), protocol.IdempotencyReuse},
		{"run/submit", fmt.Sprintf(`{"runId":"x","submission":%s}`, submission("x", graphOf(step("a", "echo")))), protocol.GraphInvalid},
		{"run/status", `{"runId":"done","extra":1}`, protocol.SchemaViolation},
	}
	for _, x := range errs {
		if _, e := c.call(x.method, x.params); dataCode(e) != x.code {
			t.Fatalf("%s %s: %v, want %s", x.method, x.params, e, x.code)
		}
	}
}

// Shape of BenchmarkRuns: -runs.queued one-step runs submitted
// concurrently over at least benchConns WebSocket connections (more for
// deep queues, at most benchRunsPerConn runs each, so that no connection
// has more requests outstanding than it may), under each of benchBounds:
// the default bound of 16 active executions (the runs then go through in
// waves), and no bound (all of them run at once).
const (
	benchConns       = 16
	benchRunsPerConn = 128
)

// benchQueued is the number of runs one op submits (-runs.queued).
var benchQueued = flag.Int("runs.queued", 1000, "BenchmarkRuns: runs submitted per op (the queue depth)")

var benchBounds = []int{capsule.DefaultMaxActive, 0}

// BenchmarkRuns measures native runs finished per second: one op submits
// -runs.queued one-step runs over its connections at once, waits until
// every one is admitted, watches each, and ends when the last watch closes
// done, under the bound max-active=N of active executions (0: none). Each
// run settles one execution, so settled/s is runs/s. B/queued-run is the
// live heap after admission (less the heap before the op) over the runs.
// The baseline, measured in the same op on a fresh store of the same kind
// (outside the timed part), is the store's raw rate of single-event
// commits: as many commits of one event each as runs, from benchConns
// goroutines (raw-commits/s); settled/raw is the ratio of the two. The
// postgres cases run when OECP_TEST_POSTGRES names a server. Run with:
//
//	go test -run '^$' -bench Runs -benchtime 3x ./runs/ -runs.queued=16000
func BenchmarkRuns(b *testing.B) {
	runs.CheckStateCache(false)
	defer runs.CheckStateCache(true)
	stores := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"memory", func(*testing.B) store.Store { return store.NewMemory() }},
		{"sqlite-normal", benchSQLite},
		{"postgres", benchPostgres},
	}
	for _, st := range stores {
		for _, bound := range benchBounds {
			b.Run(fmt.Sprintf("runs/%s/max-active=%d", st.name, bound), func(b *testing.B) { benchRuns1(b, st.open, bound) })
		}
	}
}

// benchSQLite opens a fresh SQLite store (synchronous=normal) for one
// benchmark op.
func benchSQLite(b *testing.B) store.Store { return openBenchSQLite(b, sqlite.SyncNormal) }

// benchSQLiteFull opens a fresh SQLite store with the server's default
// durability (synchronous=full: an fsync at every commit) for one
// benchmark op.
func benchSQLiteFull(b *testing.B) store.Store { return openBenchSQLite(b, sqlite.SyncFull) }

func openBenchSQLite(b *testing.B, sync string) store.Store {
	s, err := sqlite.Open(context.Background(), sqlite.Options{Dir: b.TempDir(), Sync: sync})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// benchPostgres opens a store on a fresh schema of the PostgreSQL server
// OECP_TEST_POSTGRES names (the benchmark is skipped without one).
func benchPostgres(b *testing.B) store.Store {
	dsn, _ := pgtest.Schema(b)
	s, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// benchRuns1 is one case of BenchmarkRuns: stores opened by open, bound
// executions active at most.
func benchRuns1(b *testing.B, open func(b *testing.B) store.Store, bound int) {
	n := *benchQueued
	var raw time.Duration
	var heap float64
	for b.Loop() {
		b.StopTimer()
		s := open(b)
		q := newQueueRig(b, s, bound, n)
		before := liveHeap()
		b.StartTimer()
		q.run(b, func() {
			b.StopTimer()
			heap += float64(liveHeap()-before) / float64(n)
			b.StartTimer()
		})
		b.StopTimer()
		q.stop()
		_ = s.Close() // a PostgreSQL store's connections go back at once
		baseline := open(b)
		t0 := time.Now()
		rawCommits(b, baseline, n)
		raw += time.Since(t0)
		_ = baseline.Close()
		b.StartTimer()
	}
	settled := float64(b.N*n) / b.Elapsed().Seconds()
	commits := float64(b.N*n) / raw.Seconds()
	b.ReportMetric(settled, "runs/s")
	b.ReportMetric(settled, "settled/s")
	b.ReportMetric(commits, "raw-commits/s")
	b.ReportMetric(settled/commits, "settled/raw")
	b.ReportMetric(heap/float64(b.N), "B/queued-run")
}

// queueRig is one op of BenchmarkRuns: a backend and its supervisor over
// a store, a WebSocket server, and the connections that submit n runs.
type queueRig struct {
	n     int
	wires []*wiretest.WSWire
	halt  func()
}

// stop closes the rig's connections (so that an op's connections are not
// left open while later ops run) and stops its supervisor and backend.
func (q *queueRig) stop() {
	for _, w := range q.wires {
		_ = w.C.CloseNow()
	}
	q.halt()
}

func newQueueRig(b *testing.B, s store.Store, bound, n int) *queueRig {
	conns := max(benchConns, (n+benchRunsPerConn-1)/benchRunsPerConn)
	rb, stop := benchRig(b, s, bound)
	srv := wiretest.NewWSServer(b, wireBackend{Backend: cluster.NewFixture(cluster.Isolated), rb: rb}, wiretest.Options{})
	q := &queueRig{n: n, wires: make([]*wiretest.WSWire, conns), halt: stop}
	for i := range q.wires {
		q.wires[i] = srv.Dial(b, nil)
	}
	return q
}

// run submits the op's runs over its connections, calls admitted once
// every run is admitted (before any is watched), watches each and returns
// when the last watch closed done.
func (q *queueRig) run(b *testing.B, admitted func()) {
	bar := newBarrier(len(q.wires))
	go func() {
		<-bar.all
		admitted()
		close(bar.measured)
	}()
	var wg sync.WaitGroup
	for i, w := range q.wires {
		wg.Add(1)
		go func() { defer wg.Done(); driveConn(b, w, i, len(q.wires), q.n, bar) }()
	}
	testkit.Wait(b, &wg)
}

// Shape of BenchmarkDeepQueue: each op runs deepShallowOps ops of
// deepShallow runs and one of deepDeep runs, as BenchmarkRuns does at
// those depths.
const (
	deepShallow = 1000
	deepDeep    = 16000
)

var deepShallowOps = flag.Int("deepqueue.shallow", 16, "BenchmarkDeepQueue: ops of 1,000 runs per op (the PostgreSQL case runs a quarter of them)")

// BenchmarkDeepQueue measures the deep-queue ratio in one process: runs/s
// at 16,000 queued over runs/s at 1,000 queued, each as one op of
// BenchmarkRuns measures it (submission, admission, watches and every
// run to its end), at the default bound of active executions. Each op
// runs -deepqueue.shallow ops of 1,000 runs and one of 16,000, the deep
// one first in every other op, so that both depths are measured in the
// same minutes and a machine whose speed drifts moves both alike. It
// reports each depth's rate over all ops, the ratio of the two (ratio;
// 1 is flat), what the process spent per run at each depth (opCost),
// and the goroutines and stack memory it held meanwhile (held). The
// SQLite cases run with synchronous=normal and with the server's
// default, synchronous=full; the postgres case runs when
// OECP_TEST_POSTGRES names a server. Run with:
//
//	go test -run '^$' -bench DeepQueue -benchtime 3x ./runs/
func BenchmarkDeepQueue(b *testing.B) {
	runs.CheckStateCache(false)
	defer runs.CheckStateCache(true)
	cases := []struct {
		name    string
		shallow int
		open    func(b *testing.B) store.Store
	}{
		{"sqlite-normal", *deepShallowOps, benchSQLite},
		{"sqlite-full", *deepShallowOps, benchSQLiteFull},
		{"postgres", max(1, *deepShallowOps/4), benchPostgres},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var shallow, deep time.Duration
			var cost [2]opCost // at 1,000 and at 16,000 queued
			var kept [2]held   // the same
			// Each op's goroutines carry the label depth (shallow or
			// deep), so that one CPU profile of the benchmark splits the
			// two: go tool pprof -tagfocus depth=deep.
			one := func(n int) (d time.Duration) {
				depth, i := "shallow", 0
				if n == deepDeep {
					depth, i = "deep", 1
				}
				pprof.Do(context.Background(), pprof.Labels("depth", depth), func(context.Context) {
					s := c.open(b)
					defer func() { _ = s.Close() }()
					q := newQueueRig(b, s, capsule.DefaultMaxActive, n)
					defer q.stop()
					c0 := readOpCost()
					stop := sampleHeld()
					t0 := time.Now()
					q.run(b, func() {})
					d = time.Since(t0)
					cost[i] = cost[i].add(readOpCost().minus(c0))
					kept[i] = kept[i].add(stop())
				})
				return d
			}
			op := 0
			for b.Loop() {
				if op%2 == 1 {
					deep += one(deepDeep)
				}
				for range c.shallow {
					shallow += one(deepShallow)
				}
				if op%2 == 0 {
					deep += one(deepDeep)
				}
				op++
			}
			atShallow := float64(b.N*c.shallow*deepShallow) / shallow.Seconds()
			atDeep := float64(b.N*deepDeep) / deep.Seconds()
			b.ReportMetric(atShallow, "runs/s@1000")
			b.ReportMetric(atDeep, "runs/s@16000")
			b.ReportMetric(atDeep/atShallow, "ratio")
			cost[0].report(b, b.N*c.shallow*deepShallow, "@1000")
			cost[1].report(b, b.N*deepDeep, "@16000")
			kept[0].report(b, "@1000")
			kept[1].report(b, "@16000")
		})
	}
}

// opCost is what this process spent over a stretch of time: its CPU (all
// of it, and the kernel's and the garbage collector's parts) and its
// minor page faults. BenchmarkDeepQueue reports it per run at each depth:
// the ratio follows the CPU a run costs at each, and the parts say where
// the difference lies. A PostgreSQL server's own processes are not in it.
type opCost struct {
	cpu, sys, gc time.Duration
	faults       int64
}

// readOpCost reads the process's totals so far.
func readOpCost() opCost {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	gc := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(gc)
	sys := time.Duration(ru.Stime.Nano())
	return opCost{
		cpu:    time.Duration(ru.Utime.Nano()) + sys,
		sys:    sys,
		gc:     time.Duration(gc[0].Value.Float64() * float64(time.Second)),
		faults: ru.Minflt,
	}
}

func (c opCost) add(d opCost) opCost {
	return opCost{c.cpu + d.cpu, c.sys + d.sys, c.gc + d.gc, c.faults + d.faults}
}

func (c opCost) minus(d opCost) opCost {
	return opCost{c.cpu - d.cpu, c.sys - d.sys, c.gc - d.gc, c.faults - d.faults}
}

// report reports c per run over n runs, each metric's unit ending in
// suffix.
func (c opCost) report(b *testing.B, n int, suffix string) {
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	b.ReportMetric(us(c.cpu), "cpu-us/run"+suffix)
	b.ReportMetric(us(c.sys), "sys-us/run"+suffix)
	b.ReportMetric(us(c.gc), "gc-us/run"+suffix)
	b.ReportMetric(float64(c.faults)/float64(n), "minflt/run"+suffix)
}

// held is what the process held while ops ran, sampled every 10 ms: the
// goroutines and their stacks' memory, summed over the samples, and the
// largest sample of each. BenchmarkDeepQueue reports the mean and the
// peak at each depth.
type held struct {
	samples                    int
	goroutines, stacks         float64
	peakGoroutines, peakStacks float64
}

// sampleHeld samples until the returned function is called, and that
// function returns the samples.
func sampleHeld() func() held {
	var h held
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/sched/goroutines:goroutines"}, {Name: "/memory/classes/heap/stacks:bytes"}}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			metrics.Read(s)
			g, st := float64(s[0].Value.Uint64()), float64(s[1].Value.Uint64())/(1<<20)
			h.samples++
			h.goroutines += g
			h.stacks += st
			h.peakGoroutines = max(h.peakGoroutines, g)
			h.peakStacks = max(h.peakStacks, st)
		}
	}()
	return func() held {
		close(stop)
		<-done
		return h
	}
}

func (h held) add(o held) held {
	return held{h.samples + o.samples, h.goroutines + o.goroutines, h.stacks + o.stacks,
		max(h.peakGoroutines, o.peakGoroutines), max(h.peakStacks, o.peakStacks)}
}

// report reports the mean and the peak, each metric's unit ending in
// suffix.
func (h held) report(b *testing.B, suffix string) {
	if h.samples == 0 {
		return
	}
	b.ReportMetric(h.goroutines/float64(h.samples), "goroutines"+suffix)
	b.ReportMetric(h.peakGoroutines, "goroutines-peak"+suffix)
	b.ReportMetric(h.stacks/float64(h.samples), "stack-MB"+suffix)
	b.ReportMetric(h.peakStacks, "stack-MB-peak"+suffix)
}

// benchRig is a backend over st with a running supervisor of at most
// bound active executions, until stop.
func benchRig(t testing.TB, st store.Store, bound int) (_ *runs.Backend, stop func()) {
	b := runs.New(runs.Config{Store: st, Agents: newFakeAgents(), Log: slog.New(slog.DiscardHandler)})
	sup := engine.New(b.Ledger("bench-owner"), worker.NewRegistry(), slog.New(slog.DiscardHandler))
	sup.SetMaxActive(bound)
	halt := runSupervisor(t, sup)
	return b, func() { halt(); b.Close() }
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// barrier is where BenchmarkRuns' connections wait for each other once
// their runs are admitted: all is closed when the last one arrives, and
// the connections go on when measured is closed.
type barrier struct {
	mu       sync.Mutex
	left     int
	all      chan struct{}
	measured chan struct{}
}

func newBarrier(n int) *barrier {
	return &barrier{left: n, all: make(chan struct{}), measured: make(chan struct{})}
}

func (b *barrier) arrive() {
	b.mu.Lock()
	b.left--
	if b.left == 0 {
		close(b.all)
	}
	b.mu.Unlock()
	<-b.measured
}

// driveConn submits connection i's share (of conns) of the n runs, waits
// at admitted until every run is admitted, watches each, and returns when
// every watch has closed done.
func driveConn(b *testing.B, w *wiretest.WSWire, i, conns, n int, admitted *barrier) {
	var ids []string
	for k := i; k < n; k += conns {
		id := fmt.Sprintf("bench-%d", k)
		if err := w.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"run/submit","params":{"runId":%q,"submission":%s}}`, id, id, oneStep(id, "echo"))); err != nil {
			b.Error(err)
		}
		ids = append(ids, id)
	}
	type frame struct {
		ID     string          `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	recv := func() (frame, bool) {
		raw, err := w.Recv()
		if err != nil {
			b.Error(err)
			return frame{}, false
		}
		var m frame
		_ = json.Unmarshal([]byte(raw), &m)
		if m.Error != nil {
			b.Errorf("error frame %s", raw)
			return m, false
		}
		return m, true
	}
	for answered := 0; answered < len(ids); {
		m, ok := recv()
		if !ok {
			admitted.arrive()
			return
		}
		if strings.HasPrefix(m.ID, "bench-") {
			answered++
		}
	}
	admitted.arrive()
	for _, id := range ids {
		if err := w.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"w-%s","method":"run/watch","params":{"runId":%q}}`, id, id)); err != nil {
			b.Error(err)
		}
	}
	for done := 0; done < len(ids); {
		m, ok := recv()
		if !ok {
			return
		}
		if m.Method == "subscription/closed" {
			done++
		}
	}
}

// rawCommits is the baseline: n store commits of one event each,
// from benchConns goroutines.
func rawCommits(b *testing.B, s store.Store, n int) {
	ctx := context.Background()
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateRun("t", store.Run{ID: "r"}) }); err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"kind":"node_completed"}`)
	var wg sync.WaitGroup
	for i := range benchConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := i; k < n; k += benchConns {
				err := s.Update(ctx, func(tx store.Tx) error {
					_, err := tx.AppendEvent("t", "r", func(uint64) ([]byte, error) { return body, nil })
					return err
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	testkit.Wait(b, &wg)
}
