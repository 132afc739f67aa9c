package capsule_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/workspace"
)

// The generated repository of BenchmarkWorkspaceFromMirror: 40 commits of
// an 8 MiB random blob, deleted at the end (320 MiB of history, a
// one-file tree).
const (
	benchCommits  = 40
	benchBlobSize = 8 << 20
)

// cachedHistory returns the benchmark's repository, generated once into
// the temporary directory and kept there for later runs, and its head.
func cachedHistory(b *testing.B) (string, string) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("oecp-bench-history-%dx%d.git", benchCommits, benchBlobSize))
	if out, err := exec.Command("git", "-C", dir, "rev-parse", "--verify", "refs/heads/main").Output(); err == nil {
		return dir, strings.TrimSpace(string(out))
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	head := gittest.WriteHistory(b, tmp, benchCommits, benchBlobSize)
	if err := os.Rename(tmp, dir); err != nil {
		b.Fatal(err)
	}
	return dir, head
}

// instantCodex writes a codex CLI that answers {"summary":"done"} at
// once.
func instantCodex(b *testing.B) string {
	path := filepath.Join(b.TempDir(), "codex")
	script := "#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' '{\"type\":\"thread.started\",\"thread_id\":\"th-1\"}' " +
		`'{"type":"item.completed","item":{"type":"agent_message","text":"{\"summary\":\"done\"}"}}' '{"type":"turn.completed"}'` + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		b.Fatal(err)
	}
	return path
}

// oneAgentGraph is a run of one agent step, write (null to {summary}),
// then succeed.
func oneAgentGraph(b *testing.B) []byte {
	write := M{"kind": "step", "name": "write", "worker": "agent.write@1", "instructions": "Improve NOTES.md.",
		"input": M{"kind": "null"}, "output": tRec(req("summary", tStr)),
		"inputBindings": []any{}, "writeBindings": []any{}, "timeoutMs": 600000, "attempts": 1}
	done := M{"kind": "succeed", "name": "done", "output": M{"kind": "null"}, "bindings": []any{}}
	return mustJSON(b, M{"profile": "openengine.graph.full/v1", "initialInput": M{"kind": "null"},
		"policy": M{"policy": "policy.default@1", "default": "deny"}, "root": M{"kind": "seq", "name": "main", "state": M{"kind": "null"},
			"promotedStatePaths": []any{}, "children": []any{write, done}}})
}

// BenchmarkWorkspaceFromMirror compares, in one run, a full clone of a
// repository with a large history and a small tree (git clone over
// file://, the transport a remote uses) with a native run of it, from
// submit to finished with an agent that answers at once, once the host's
// mirror of the repository exists. It reports both times, their ratio
// (goal: at least 3), the first run's time (which makes the mirror) and
// how much of the mirror's object bytes a run's own git directory holds
// (goal: under 5%).
func BenchmarkWorkspaceFromMirror(b *testing.B) {
	remote, head := cachedHistory(b)
	url := "file://" + remote
	b.Setenv("OPENAI_API_KEY", "bench")
	h := parseHarness(b, "codex", M{"argv": []string{instantCodex(b)}, "env": []string{"OPENAI_API_KEY"}})
	repos := reposAt(b, "acme/big", url)
	runDir := b.TempDir()
	e := start(b, capsule.Options{Harness: h, Repos: repos, RunDir: runDir})
	graph := oneAgentGraph(b)
	const plan = `{"harness":"codex","provider":"openai","size":"small","nodes":{"write":{"kind":"agent","model":"gpt-5.6","env":["OPENAI_API_KEY"]}}}`
	run := func(id string) time.Duration {
		start := time.Now()
		sub := `{"title":"bench","graph":` + string(graph) + `,"initialInput":null,"runtime":` + plan +
			`,"source":{"repository":"acme/big","branch":"main","revision":"` + head + `"},"submissionKey":"` + id + `"}`
		if _, err := e.b.Runs().Submit(local(), id, json.RawMessage(sub)); err != nil {
			d, _ := json.Marshal(err)
			b.Fatalf("submit %s: %v %s", id, err, d)
		}
		awaitRunEnd(b, e, id)
		elapsed := time.Since(start)
		st, err := e.b.Runs().Status(local(), id)
		if err != nil || string(st.Status.TerminalResult) != `{"status":"succeeded","output":null}` {
			b.Fatalf("run %s: %v %s", id, err, st.Status.TerminalResult)
		}
		return elapsed
	}
	first := run("first")
	var clone, second time.Duration
	n := 0
	for b.Loop() {
		dst := filepath.Join(b.TempDir(), "clone")
		start := time.Now()
		if out, err := exec.Command("git", "clone", "--quiet", "--no-tags", url, dst).CombinedOutput(); err != nil {
			b.Fatalf("clone: %v\n%s", err, out)
		}
		clone += time.Since(start)
		_ = os.RemoveAll(dst)
		second += run(fmt.Sprint("again-", n))
		n++
	}
	mirrors, _ := filepath.Glob(filepath.Join(runDir, "mirrors", "*.git"))
	if len(mirrors) != 1 {
		b.Fatalf("mirrors %v", mirrors)
	}
	key := workspace.Key(e.b.Runs().TenantKey(identity.Local().Tenant), "again-0")
	own, objects := testkit.TreeBytes(b, filepath.Join(runDir, filepath.FromSlash(key), "git")), testkit.TreeBytes(b, filepath.Join(mirrors[0], "objects"))
	b.ReportMetric(float64(clone.Milliseconds())/float64(n), "clone-ms/op")
	b.ReportMetric(float64(second.Milliseconds())/float64(n), "run-ms/op")
	b.ReportMetric(float64(first.Milliseconds()), "first-run-ms")
	b.ReportMetric(float64(clone)/float64(second), "clone/run")
	b.ReportMetric(100*float64(own)/float64(objects), "gitdir-%")
	b.ReportMetric(float64(objects)/(1<<20), "mirror-MiB")
}
