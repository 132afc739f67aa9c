package capsule_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sys/unix"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/engine/harness/sandbox/sandboxtest"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
	"github.com/oecp/oecp/store/sqlite"
	"github.com/oecp/oecp/tracing/tracingtest"
	"github.com/oecp/oecp/workspace"
)

// agentStepRuns is how many runs one sub-benchmark op makes (each op is
// one run; -benchtime Nx sets N).
var agentStepFiles = flag.Int("agentstep.files", 200, "files in the repository the agent-step benchmark's runs check out")

// agentStepKeep is how long the benchmark's server keeps a finished run's
// directory: the server's default (a day), or 0 to remove it at once, as
// `oecp serve --keep-workspaces 0` does (each run's checkout is then
// written while the last one's files are being freed).
var agentStepKeep = flag.Duration("agentstep.keep", workspace.DefaultKeep, "keep a finished run's directory this long in the agent-step benchmark (0: remove it at once)")

// agentStepStages turns tracing on (into memory) for the agent-step
// benchmark and reports each traced stage's median beside the totals.
// Off by default: the spans themselves cost a little.
var agentStepStages = flag.Bool("agentstep.stages", false, "report the median of each traced stage of the agent-step benchmark's runs")

// agentStepTimeline, with agentstep.stages, prints to stderr every traced
// span of the runs in the order they started, each as its start and end
// in ms from its run's start: where one run's time went, stage by stage.
var agentStepTimeline = flag.Bool("agentstep.timeline", false, "with -agentstep.stages, print each run's spans in ms from the run's start")

// quickAgent answers a turn at once, as the command driver expects, and
// changes one file of the workspace (so every step has a checkpoint to
// make).
const quickAgent = `#!/bin/sh
cat >/dev/null
echo "$$" > step.txt
echo '{"session":"s","text":"null"}'
`

// BenchmarkAgentStep runs native runs of 1 and 5 steps whose agent (the
// command driver) answers at once, one run at a time, through the whole
// path: the workspace from the mirror, the sandbox and its UID lease when
// on, each step's checkpoint and settlement. It reports, per step, the
// milliseconds the server adds to the agent program run directly (the
// same program, same input, measured in the same op): p50 and p90 over
// the runs of the op (-benchtime Nx), the direct program's own p50, and
// the store's write transactions per step (commits/step, the run's
// submission included).
//
// Every sub-benchmark's files stay until the last one has ended: a
// sub-benchmark's thousands of files removed at its end would be inodes
// freed just before the next one writes (see workspace's placeRuns), a
// cost of the benchmark's own clean-up rather than of the server. The
// server's own removals, with -agentstep.keep 0, are measured. For the
// same reason each sub-benchmark's directory is placed away from the
// temporary directory's other files (spreadSubdirs), among which an
// earlier process's clean-up may just have freed thousands of inodes.
func BenchmarkAgentStep(b *testing.B) {
	root := b.TempDir()
	spreadSubdirs(b, root)
	subDir := func(b *testing.B) string {
		dir, err := os.MkdirTemp(root, "")
		if err == nil {
			err = os.Chmod(dir, 0o755) // as b.TempDir's: the sandbox UIDs pass through
		}
		if err != nil {
			b.Fatal(err)
		}
		return dir
	}
	stores := map[string]func(b *testing.B) store.Store{
		"sqlite": func(b *testing.B) store.Store {
			st, err := sqlite.Open(context.Background(), sqlite.Options{Dir: subDir(b), Sync: sqlite.SyncNormal})
			if err != nil {
				b.Fatal(err)
			}
			return st
		},
		"postgres": func(b *testing.B) store.Store {
			dsn, _ := pgtest.Schema(b)
			st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
			if err != nil {
				b.Fatal(err)
			}
			return st
		},
	}
	for _, storeName := range []string{"sqlite", "postgres"} {
		for _, confined := range []bool{false, true} {
			for _, steps := range []int{1, 5} {
				name := fmt.Sprintf("%s/sandbox=%v/steps=%d", storeName, confined, steps)
				b.Run(name, func(b *testing.B) {
					benchAgentSteps(b, stores[storeName](b), subDir(b), confined, steps)
				})
			}
		}
	}
}

func benchAgentSteps(b *testing.B, st store.Store, dir string, confined bool, steps int) {
	agent := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(agent, []byte(quickAgent), 0o755); err != nil {
		b.Fatal(err)
	}
	remote := benchRemote(b, filepath.Join(dir, "remote.git"), *agentStepFiles)
	h := parseHarness(b, "codex", map[string]any{"driver": "command", "argv": []string{"/bin/sh", agent}})
	repos := reposAt(b, "acme/app", remote)
	o := capsule.Options{Store: st, Harness: h, Repos: repos, RunDir: filepath.Join(dir, "runs"), KeepWorkspaces: keepWorkspaces(*agentStepKeep), Log: benchLog()}
	if confined {
		o.Sandbox = sandboxtest.Require(b, sandbox.Config{Hide: []string{o.RunDir}, Programs: h.Programs()})
	}
	var rec *tracingtest.Recorder
	if *agentStepStages {
		rec = tracingtest.Start(b)
	}
	var commits commitCounter
	if obs, ok := st.(store.Observable); ok {
		obs.SetObserver(&commits)
	}
	e := start(b, o)
	head := gitOut(b, remote, "rev-parse", "HEAD")
	graph, plan := stepsGraph(steps)

	var added, direct []time.Duration
	createdAtStart := createCost(b, dir)
	commits.n.Store(0) // the server's own start-up writes are not a step's
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("step-%d", i)
		began := time.Now()
		sub := `{"title":"bench","graph":` + graph + `,"initialInput":null,"runtime":` + plan +
			`,"source":{"repository":"acme/app","branch":"main","revision":"` + head + `"},"submissionKey":"` + id + `"}`
		if _, err := e.b.Runs().Submit(local(), id, json.RawMessage(sub)); err != nil {
			b.Fatal(err)
		}
		awaitRunEnd(b, e, id)
		took := time.Since(began)
		stat, err := e.b.Runs().Status(local(), id)
		if err != nil || !strings.Contains(string(stat.Status.TerminalResult), `"succeeded"`) {
			b.Fatalf("run %s: %s %v", id, stat.Status.TerminalResult, err)
		}
		b.StopTimer()
		// A worker's failure is a control the graph may ignore (the run
		// still succeeds): every step must have run its agent to success.
		if ended := executionsEnded(b, e, id); len(ended) != steps || slices.ContainsFunc(ended, func(s string) bool { return s != "succeeded" }) {
			b.Fatalf("run %s: its %d steps' executions ended %q", id, steps, ended)
		}
		// The same program, run directly as many times as the run had
		// steps, in the run's directory.
		var prog time.Duration
		for range steps {
			t0 := time.Now()
			cmd := exec.Command("/bin/sh", agent)
			cmd.Dir = dir
			cmd.Stdin = strings.NewReader(`{"instructions":"go"}`)
			if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), `"session"`) {
				b.Fatalf("the agent alone: %v %s", err, out)
			}
			d := time.Since(t0)
			prog += d
			direct = append(direct, d)
		}
		added = append(added, (took-prog)/time.Duration(steps))
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(added, 50)), "added-ms/step-p50")
	b.ReportMetric(ms(percentile(added, 90)), "added-ms/step-p90")
	b.ReportMetric(ms(percentile(direct, 50)), "direct-ms-p50")
	b.ReportMetric(float64(commits.n.Load())/float64(b.N*steps), "commits/step")
	b.ReportMetric(createdAtStart, "fs-create-us-start")
	b.ReportMetric(createCost(b, dir), "fs-create-us-end")
	if rec != nil {
		reportStages(b, rec.Spans())
	}
}

// spreadSubdirs marks dir as the top of unrelated directory trees (the
// TOPDIR flag of ext2/3/4): the file system then places each new
// subdirectory, and the files under it, in block groups of its own,
// those holding the fewest directories, instead of beside dir. On a file
// system that is not ext it does nothing.
func spreadSubdirs(b *testing.B, dir string) {
	const topdir = 0x00020000 // FS_TOPDIR_FL
	f, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|topdir))
	}
	if err != nil {
		b.Logf("the benchmark's directories stay beside each other: %v", err)
	}
}

// createCost writes as many small files as a run's checkout into a new
// directory beside the runs' and returns the microseconds each took: the
// file system's cost of a new inode there at that moment, which every
// checkout pays. On ext4 without a journal it is several times its usual
// value for minutes after many files were removed near there (the
// allocator passes over every inode freed in the last minute or more, for
// each new one), as after an earlier benchmark's clean-up; readings with a
// high value here are of the file system, not of the server. The files
// stay until the benchmark's own clean-up.
func createCost(b *testing.B, dir string) float64 {
	d, err := os.MkdirTemp(dir, "create-cost-")
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 256)
	began := time.Now()
	for i := range *agentStepFiles {
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%04d", i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return float64(time.Since(began).Microseconds()) / float64(max(*agentStepFiles, 1))
}

// commitCounter counts a store's write transactions (store.Observer).
type commitCounter struct{ n atomic.Int64 }

func (c *commitCounter) Commit(time.Duration, bool) { c.n.Add(1) }
func (c *commitCounter) LeaseTakenOver()            {}

// executionsEnded returns how each execution of run id ended, in order,
// as its log says ("succeeded", "failed (…)").
func executionsEnded(b *testing.B, e *env, id string) []string {
	var ended []string
	for _, msg := range logMessages(b, e.b.Runs(), id) {
		if how, ok := strings.CutPrefix(msg, capsule.EndRecordPrefix); ok {
			ended = append(ended, how)
		}
	}
	return ended
}

// stepNode is the node name stepsGraph gives an agent step, at the end of
// a span's name.
var stepNode = regexp.MustCompile(` s[0-9]+$`)

// reportStages reports the median duration of each kind of span the runs
// traced, as ms-p50/<name> (the node's name dropped: "invoke_agent s1"
// and "invoke_agent s2" are one stage).
func reportStages(b *testing.B, spans tracetest.SpanStubs) {
	byStage := map[string][]time.Duration{}
	if *agentStepTimeline {
		type run struct {
			n     int
			start time.Time
		}
		runs := map[trace.TraceID]run{}
		for _, s := range spans {
			if s.Name == "run" {
				runs[s.SpanContext.TraceID()] = run{start: s.StartTime}
			}
		}
		ss := slices.Clone(spans)
		slices.SortFunc(ss, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
		n := 0
		for _, s := range ss {
			r, ok := runs[s.SpanContext.TraceID()]
			if !ok {
				continue
			}
			if s.Name == "run" {
				n++
				r.n = n
				runs[s.SpanContext.TraceID()] = r
			}
			fmt.Fprintf(os.Stderr, "%s run %3d  %-24s %7.2f .. %7.2f ms\n", b.Name(), runs[s.SpanContext.TraceID()].n, s.Name, ms(s.StartTime.Sub(r.start)), ms(s.EndTime.Sub(r.start)))
		}
	}
	for _, s := range spans {
		name := stepNode.ReplaceAllString(s.Name, "")
		byStage[name] = append(byStage[name], s.EndTime.Sub(s.StartTime))
	}
	for _, name := range slices.Sorted(maps.Keys(byStage)) {
		b.ReportMetric(ms(percentile(byStage[name], 50)), "ms-p50/"+strings.ReplaceAll(name, " ", "_"))
	}
}

// keepWorkspaces is keep as capsule.Options.KeepWorkspaces (0 there is
// the default; negative removes at once).
func keepWorkspaces(keep time.Duration) time.Duration {
	if keep == 0 {
		return -1
	}
	return keep
}

// stepsGraph is a native graph of n agent steps in sequence, and its
// runtime plan on the codex harness entry.
func stepsGraph(n int) (graph, plan string) {
	var children, nodes []string
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("s%d", i)
		children = append(children, `{"kind":"step","name":"`+name+`","worker":"agent.`+name+`@1","instructions":"go","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":600000,"attempts":1}`)
		nodes = append(nodes, `"`+name+`":{"kind":"agent","model":"gpt-5.6"}`)
	}
	children = append(children, `{"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}`)
	graph = `{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":{"policy":"policy.default@1","default":"deny"},` +
		`"root":{"kind":"seq","name":"main","state":{"kind":"null"},"promotedStatePaths":[],"children":[` + strings.Join(children, ",") + `]}}`
	plan = `{"harness":"codex","provider":"openai","size":"tiny","nodes":{` + strings.Join(nodes, ",") + `}}`
	return graph, plan
}

// benchRemote makes a bare repository at dir whose main branch holds
// files small files in a few directories, and returns its path.
func benchRemote(tb testing.TB, dir string, files int) string {
	tb.Helper()
	work := filepath.Join(filepath.Dir(dir), "seed")
	for i := range files {
		p := filepath.Join(work, fmt.Sprintf("d%02d", i%16), fmt.Sprintf("f%04d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat(fmt.Sprintf("line %d\n", i), 20)), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	gitOut(tb, work, "init", "--quiet", "--initial-branch=main")
	gitOut(tb, work, "add", "-A")
	gitOut(tb, work, "-c", "user.name=seed", "-c", "user.email=seed@example.com", "commit", "--quiet", "-m", "seed")
	gitOut(tb, filepath.Dir(dir), "clone", "--quiet", "--bare", work, dir)
	return dir
}

func gitOut(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func benchLog() *slog.Logger {
	if os.Getenv("AGENTSTEP_LOG") == "" {
		return quietLog()
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
