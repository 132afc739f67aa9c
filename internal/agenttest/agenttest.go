// Package agenttest is what the tests of agent runs in several packages
// share: the replaying fake agent CLI of engine/harness's testdata, a fake
// forge CLI (gh), a repository file naming a test remote, and a two-node
// graph of an agent step and a pull-request delivery. It is imported by
// tests only.
package agenttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/oecp/oecp/workspace"
)

// root is the repository's root directory.
func root(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("agenttest: cannot locate the repository")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// FakeCLIScript is engine/harness/testdata/fake-cli.sh: run with its
// state directory d as its binary's parent's parent, turn N (d/count)
// runs d/actions/N, prints d/events/N, exits with d/exits/N and records
// its argv, env, stdin and cwd under d/calls.
func FakeCLIScript(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "engine", "harness", "testdata", "fake-cli.sh"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FakeCLIDir makes dir the fake CLI's state directory: the directories
// calls, actions, events and bin, count at turn 0, and files (name
// relative to dir → content, written executable).
func FakeCLIDir(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for _, sub := range []string{"calls", "actions", "events", "bin"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "count"), []byte("0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TwoNodesPlan is the runtime plan of TwoNodes on codex.
const TwoNodesPlan = `{"harness":"codex","provider":"openai","size":"small","nodes":{"write":{"kind":"agent","model":"gpt-5.6","env":["OPENAI_API_KEY"]},"deliver":{"kind":"git_delivery"}}}`

// TwoNodes is a graph of an agent step `write` (null to the example
// writer's {summary}) and the pull-request delivery `deliver` of
// examples/agents/review-loop.json.
func TwoNodes(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(t), "examples", "agents", "review-loop.json"))
	if err != nil {
		t.Fatal(err)
	}
	var example any
	if err := json.Unmarshal(data, &example); err != nil {
		t.Fatal(err)
	}
	// at walks the example graph by object keys and array indices.
	at := func(path ...any) any {
		v := example
		for _, p := range path {
			if i, ok := p.(int); ok {
				v = v.([]any)[i]
			} else {
				v = v.(map[string]any)[p.(string)]
			}
		}
		return v
	}
	write := map[string]any{"kind": "step", "name": "write", "worker": "agent.write@1", "instructions": "Improve NOTES.md.",
		"input": map[string]any{"kind": "null"}, "output": at("root", "children", 0, "body", "children", 0, "output"),
		"inputBindings": []any{}, "writeBindings": []any{}, "timeoutMs": 600000, "attempts": 1}
	deliver := at("root", "children", 1, "branches", 0, "node", "children", 0)
	done := map[string]any{"kind": "succeed", "name": "done", "output": map[string]any{"kind": "null"}, "bindings": []any{}}
	b, err := json.Marshal(map[string]any{"profile": "openengine.graph.full/v1", "initialInput": map[string]any{"kind": "null"},
		"policy": at("policy"), "root": map[string]any{"kind": "seq", "name": "main", "state": map[string]any{"kind": "null"},
			"promotedStatePaths": []any{}, "children": []any{write, deliver, done}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FakeGH is the path of the examples' fake forge CLI,
// examples/agents/bin/gh.
func FakeGH(t testing.TB) string {
	t.Helper()
	return filepath.Join(root(t), "examples", "agents", "bin", "gh")
}

// ReposFile is the content of a repos.json (--repos) that serves the
// repository acme/app from remoteDir, with FakeGH over remoteDir as its
// forge.
func ReposFile(t testing.TB, remoteDir string) map[string]any {
	t.Helper()
	return map[string]any{"acme/app": map[string]any{"url": remoteDir, "forge": map[string]any{"argv": []string{FakeGH(t), "--remote", remoteDir}}}}
}

// Repos is ReposFile parsed.
func Repos(t testing.TB, remoteDir string) *workspace.Repos {
	t.Helper()
	b, err := json.Marshal(ReposFile(t, remoteDir))
	if err != nil {
		t.Fatal(err)
	}
	repos, err := workspace.ParseRepos("repos.json", b)
	if err != nil {
		t.Fatal(err)
	}
	return repos
}
