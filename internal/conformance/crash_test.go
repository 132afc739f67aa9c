package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/protocol"
)

// startServer runs `oecp serve --listen 127.0.0.1:0 args...` and waits for
// the line that names its URL.
func startServer(t *testing.T, args ...string) *wiretest.Server {
	t.Helper()
	return wiretest.StartServer(t, binPath, nil, args...)
}

// crashGraph is one step on a command worker that sleeps on its first
// execution (marking it started) and answers at once afterwards; it has
// two attempts.
func crashGraph(t *testing.T, dir string) (graphJSON []byte, workersFile string) {
	t.Helper()
	marker := filepath.Join(dir, "started")
	script := fmt.Sprintf(`read in; if [ -e %[1]q ]; then echo '{"text":"resumed"}'; else touch %[1]q; echo started >&2; exec sleep 3600; fi`, marker)
	workers := []map[string]any{{
		"worker": "test.slow@1", "kind": "step",
		"input": map[string]any{"kind": "null"}, "output": map[string]any{"kind": "record", "fields": map[string]any{"text": map[string]any{"required": true, "type": map[string]any{"kind": "string"}}}},
		"argv": []string{"/bin/sh", "-c", script}, "env": []string{"PATH"},
	}}
	workersFile = filepath.Join(dir, "workers.json")
	data, _ := json.Marshal(workers)
	if err := os.WriteFile(workersFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rec := map[string]any{"kind": "record", "fields": map[string]any{"text": map[string]any{"required": true, "type": map[string]any{"kind": "string"}}}}
	g := map[string]any{
		"profile":      "openengine.graph.full/v1",
		"initialInput": rec,
		"policy":       map[string]any{"policy": "policy.default@1", "default": "deny"},
		"root": map[string]any{
			"kind": "seq", "name": "main", "state": rec, "promotedStatePaths": []any{},
			"children": []any{
				map[string]any{
					"kind": "step", "name": "slow", "worker": "test.slow@1",
					"input": map[string]any{"kind": "null"}, "output": rec,
					"inputBindings": []any{},
					"writeBindings": []any{map[string]any{"value": map[string]any{"node": "slow", "channel": "out", "path": []any{"text"}}, "target": []any{"text"}}},
					"timeoutMs":     3600000, "attempts": 2,
				},
				map[string]any{"kind": "succeed", "name": "done", "output": rec,
					"bindings": []any{map[string]any{"target": []any{"text"}, "value": map[string]any{"source": "state", "path": []any{"text"}}}}},
			},
		},
	}
	graphJSON, _ = json.Marshal(g)
	return graphJSON, workersFile
}

func dialT(t *testing.T, url string) *client.Conn {
	t.Helper()
	c, err := client.Dial(context.Background(), url, client.DialOptions{AllowPlaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestSIGKILLMidRunLosesNothing: a server killed with SIGKILL while a
// worker runs comes back with every acknowledged receipt and event under
// the same cursors; a watch resumes with no gap; the orphaned execution
// ends as crash and the run finishes on its second attempt.
func TestSIGKILLMidRunLosesNothing(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	g, workers := crashGraph(t, dir)
	args := []string{"--data", data, "--sync", "full", "--workers", workers}
	ctx := context.Background()

	srv := startServer(t, args...)
	c := dialT(t, srv.URL)
	logs, err := c.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub, _, err := c.Watch(ctx, client.WatchParams{})
	if err != nil {
		t.Fatal(err)
	}
	applyP := client.ApplyParams{Graph: g, Input: json.RawMessage(`{"text":"first"}`), IdempotencyKey: "crash-apply"}
	receipt, err := c.Apply(ctx, applyP)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the worker itself reports it started: its execution is
	// then active in the ledger and its process is sleeping.
	for ev := range logs.Events() {
		if ev.Record.Message == "started" {
			break
		}
	}
	var before []client.WatchEvent
	for ev := range sub.Events() {
		before = append(before, ev)
		if ev.Event.Type == protocol.EventNodeBegin {
			break
		}
	}
	_ = srv.Signal(t, syscall.SIGKILL)

	srv2 := startServer(t, args...)
	c2 := dialT(t, srv2.URL)
	// The acknowledged receipt is still there.
	again, err := c2.Apply(ctx, applyP)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Deduped || *again.RunID != *receipt.RunID || *again.Generation != *receipt.Generation {
		t.Fatalf("receipt after restart %+v, before %+v", again, receipt)
	}
	// Every event seen before the kill replays under the same cursor.
	full, _, err := c2.Watch(ctx, client.WatchParams{RunID: *receipt.RunID})
	if err != nil {
		t.Fatal(err)
	}
	var replay []client.WatchEvent
	for ev := range full.Events() {
		replay = append(replay, ev)
		if ev.Event.Type == protocol.EventFinished {
			break
		}
	}
	for i, ev := range before {
		if i >= len(replay) || replay[i].Cursor != ev.Cursor {
			t.Fatalf("event %d (%s) missing after restart", i, ev.Cursor)
		}
		if stripSub(t, replay[i].Raw) != stripSub(t, ev.Raw) {
			t.Fatalf("event %s changed across the restart:\n%s\n%s", ev.Cursor, ev.Raw, replay[i].Raw)
		}
	}
	// A watch resumed from the last cursor seen before the kill continues
	// with exactly the events after it.
	resumed, _, err := c2.Watch(ctx, client.WatchParams{RunID: *receipt.RunID, FromCursor: before[len(before)-1].Cursor})
	if err != nil {
		t.Fatal(err)
	}
	i := len(before)
	for ev := range resumed.Events() {
		if i >= len(replay) || ev.Cursor != replay[i].Cursor {
			t.Fatalf("resumed watch: got %s at %d", ev.Cursor, i)
		}
		i++
		if ev.Event.Type == protocol.EventFinished {
			break
		}
	}
	// After the restart: the orphan ended as crash (node_end + fault),
	// attempt 2 ran, and the run succeeded.
	var crashed, faulted, second bool
	for _, ev := range replay[len(before):] {
		switch ev.Event.Type {
		case protocol.EventNodeEnd:
			if ev.Event.Node.Attempt == 1 && json.Valid(ev.Event.Outcome) && string(ev.Event.Outcome) == `{"status":"error","code":"crash","reason":"declared_failure"}` {
				crashed = true
			}
			if ev.Event.Node.Attempt == 2 {
				second = true
			}
		case protocol.EventFault:
			faulted = true
		}
	}
	if !crashed || !faulted || !second {
		t.Fatalf("after restart: crash=%v fault=%v attempt2=%v", crashed, faulted, second)
	}
	got, err := c2.Get(ctx, client.GetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.TerminalResult == nil || got.TerminalResult.Status != "succeeded" || got.TerminalResult.Output == nil || string(*got.TerminalResult.Output) != `{"text":"resumed"}` {
		t.Fatalf("terminal result %+v", got.TerminalResult)
	}
}

// stripSub drops the subscription id from event params.
func stripSub(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "subscriptionId")
	out, _ := json.Marshal(m)
	return string(out)
}

// TestSIGTERMKillsWorkerProcessGroupsAndExits: on SIGTERM the server
// stops its engine — every running command worker's process group is
// killed — and exits 0.
func TestSIGTERMKillsWorkerProcessGroupsAndExits(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	workers := filepath.Join(dir, "workers.json")
	script := fmt.Sprintf(`read in; sleep 3600 & echo $! > %q; echo started >&2; wait`, pidFile)
	spec, _ := json.Marshal([]map[string]any{{
		"worker": "test.hang@1", "kind": "step",
		"input": map[string]any{"kind": "null"}, "output": map[string]any{"kind": "null"},
		"argv": []string{"/bin/sh", "-c", script}, "env": []string{"PATH"},
	}})
	if err := os.WriteFile(workers, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	g := `{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},
		"policy":{"policy":"policy.default@1","default":"deny"},
		"root":{"kind":"seq","name":"main","state":{"kind":"null"},"promotedStatePaths":[],"children":[
		{"kind":"step","name":"hang","worker":"test.hang@1","input":{"kind":"null"},"output":{"kind":"null"},
		 "inputBindings":[],"writeBindings":[],"timeoutMs":3600000,"attempts":1},
		{"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}]}}`
	srv := startServer(t, "--store", "memory", "--workers", workers, "--shutdown-grace", "100ms")
	c := dialT(t, srv.URL)
	ctx := context.Background()
	logs, err := c.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, client.ApplyParams{Graph: json.RawMessage(g), Input: json.RawMessage("null")}); err != nil {
		t.Fatal(err)
	}
	for ev := range logs.Events() {
		if ev.Record.Message == "started" {
			break
		}
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("oecp serve exited with %v after SIGTERM, want 0", err)
	}
	// The worker's child is gone: killed with its process group (at worst a
	// zombie waiting for init to reap it).
	for {
		err := syscall.Kill(child, 0)
		if errors.Is(err, syscall.ESRCH) {
			break
		}
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if strings.Contains(string(stat), ") Z ") {
			break
		}
		runtime.Gosched()
	}
}
