package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/engine/harness/sandbox/sandboxtest"
)

// hangingHarness writes a harness file whose agent hangs in node a (the
// server is killed meanwhile) and answers null at once in any other node:
// the turn's request names its node.
func hangingHarness(t *testing.T, dir string) string {
	t.Helper()
	// Installed world-readable in a directory of its own, the agent runs
	// in the agent sandbox under any UID.
	bin := filepath.Join(dir, "agent")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(bin, "agent.sh")
	body := "read -r req || true\ncase $req in *'\"node\":\"a\"'*) echo hanging >&2; exec /bin/sleep 30;; esac\necho '{\"session\":\"s\",\"text\":\"null\"}'\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "harness.json")
	cfg := fmt.Sprintf(`{"codex":{"driver":"command","argv":["/bin/sh",%q]}}`, script)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// nativeSubmission is a two-step native run: a, then b, then succeed.
func nativeSubmission(runID string) json.RawMessage {
	step := func(name string) string {
		return `{"kind":"step","name":"` + name + `","worker":"agent.` + name + `@1","instructions":"answer null","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":600000,"attempts":1}`
	}
	g := `{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":{"policy":"policy.default@1","default":"deny"},` +
		`"root":{"kind":"seq","name":"main","state":{"kind":"null"},"promotedStatePaths":[],"children":[` + step("a") + `,` + step("b") +
		`,{"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}]}}`
	return json.RawMessage(`{"runId":"` + runID + `","submission":{"title":"crash ` + runID + `","graph":` + g + `,"initialInput":null,` +
		`"runtime":{"harness":"codex","provider":"openai","size":"tiny","nodes":{"a":{"kind":"agent","model":"gpt-5.6"},"b":{"kind":"agent","model":"gpt-5.6"}}},` +
		`"source":{"repository":"oecp/oecp","branch":"main","revision":"0123456789abcdef0123456789abcdef01234567"},"submissionKey":"` + runID + `"}}`)
}

// watchRun follows a run's watch until its event whose status satisfies
// stop (or the close), returning the events' raw params.
func watchRun(t *testing.T, c *client.Conn, runID string, stop func(status string) bool) []json.RawMessage {
	t.Helper()
	sub, _, err := c.Subscribe(context.Background(), "run/watch", map[string]string{"runId": runID})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var out []json.RawMessage
	for ev := range sub.Events() {
		out = append(out, ev)
		var p struct {
			Status json.RawMessage `json:"status"`
		}
		_ = json.Unmarshal(ev, &p)
		if stop(string(p.Status)) {
			break
		}
	}
	return out
}

// TestSIGKILLMidNativeRunsLosesNothing: native runs on SQLite, each with
// an agent running, survive a SIGKILL of their server: every acknowledged
// submission and record is there after the restart under the same
// cursors, each orphaned execution is recorded interrupted (its server
// failed, not the execution) and runs again, and every run finishes.
func TestSIGKILLMidNativeRunsLosesNothing(t *testing.T) {
	dir := t.TempDir()
	args := append([]string{"--data", filepath.Join(dir, "data"), "--sync", "full", "--harness", hangingHarness(t, dir)}, sandboxtest.ServeFlags(t)...)
	ctx := context.Background()
	ids := []string{"crash-a", "crash-b", "crash-c"}

	srv := startServer(t, args...)
	c := dialT(t, srv.URL)
	before := map[string][]json.RawMessage{}
	for _, id := range ids {
		var res struct{ RunID string }
		if err := c.Call(ctx, "run/submit", nativeSubmission(id), &res); err != nil || res.RunID != id {
			t.Fatalf("submit %s: %v %v", id, res, err)
		}
	}
	for _, id := range ids {
		// Until a is active: its agent is then hanging in its process.
		before[id] = watchRun(t, c, id, func(s string) bool { return strings.Contains(s, `"node":"a"`) })
	}
	_ = srv.Signal(t, syscall.SIGKILL)

	srv2 := startServer(t, args...)
	c2 := dialT(t, srv2.URL)
	for _, id := range ids {
		var res struct{ RunID string }
		if err := c2.Call(ctx, "run/submit", nativeSubmission(id), &res); err != nil || res.RunID != id {
			t.Fatalf("resubmit %s after the restart: %v %v", id, res, err)
		}
		after := watchRun(t, c2, id, func(s string) bool { return strings.Contains(s, `"finished"`) })
		for i, ev := range before[id] {
			if i >= len(after) || stripSub(t, after[i]) != stripSub(t, ev) {
				t.Fatalf("%s: record %d changed or missing after the restart:\n%s", id, i, ev)
			}
		}
		last := string(after[len(after)-1])
		if !strings.Contains(last, `"terminalResult":{"status":"succeeded","output":null}`) {
			t.Fatalf("%s ended %s", id, last)
		}
		logs, _, err := c2.Subscribe(ctx, "run/logs", map[string]string{"runId": id})
		if err != nil {
			t.Fatal(err)
		}
		crashed := false
		for ev := range logs.Events() {
			crashed = crashed || strings.Contains(string(ev), "was running on a server that was lost; the same node runs again")
		}
		if !crashed {
			t.Fatalf("%s: no note of the lost execution in its logs", id)
		}
	}
}
