package capsule_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/engine/harness/sandbox/sandboxtest"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/agenttest"
	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/workspace"
)

// agentHost is a capsule whose harness runs cli (the codex or claude
// fake), serving repository acme/app from a bare remote with the example
// fake forge.
type agentHost struct {
	t      *testing.T
	e      *env
	remote *gittest.Remote
}

func startAgentHost(t *testing.T, harnessName string, cli string, env ...string) *agentHost {
	t.Helper()
	return startAgentHostWith(t, harnessName, cli, capsule.Options{}, env...)
}

// startAgentHostWith is startAgentHost with more options (a store).
func startAgentHostWith(t *testing.T, harnessName string, cli string, o capsule.Options, env ...string) *agentHost {
	t.Helper()
	return startAgentHostEntry(t, harnessName, map[string]any{"argv": []string{cli}, "env": env}, o)
}

// startAgentHostEntry is startAgentHostWith with the whole harness entry
// (a baseUrl, say).
func startAgentHostEntry(t *testing.T, harnessName string, entry map[string]any, o capsule.Options) *agentHost {
	t.Helper()
	return newAgentHost(t, harnessName, entry, o, nil)
}

// startConfinedAgentHost is startAgentHost whose agents run in the agent
// sandbox (where the host has one): its CLI writes nothing outside the
// workspace.
func startConfinedAgentHost(t *testing.T, harnessName string, cli string, env ...string) *agentHost {
	t.Helper()
	confine := func(h *harness.Config, runDir string) *sandbox.Host {
		return sandboxtest.Host(t, sandbox.Config{Hide: []string{runDir}, Programs: h.Programs()})
	}
	return newAgentHost(t, harnessName, map[string]any{"argv": []string{cli}, "env": env}, capsule.Options{}, confine)
}

// newAgentHost starts the agent host; confine, when set, gives the
// sandbox its agents run in.
func newAgentHost(t *testing.T, harnessName string, entry map[string]any, o capsule.Options, confine func(h *harness.Config, runDir string) *sandbox.Host) *agentHost {
	t.Helper()
	remote := gittest.NewRemote(t)
	h := parseHarness(t, harnessName, entry)
	o.Harness, o.Repos, o.RunDir = h, agenttest.Repos(t, remote.Dir), t.TempDir()
	if confine != nil {
		o.Sandbox = confine(h, o.RunDir)
	}
	e := start(t, o)
	return &agentHost{t: t, e: e, remote: remote}
}

func (h *agentHost) runs() *runs.Backend { return h.e.b.Runs() }

// submit submits graph (JSON) with input, plan and the remote's head as
// run id.
func (h *agentHost) submit(id string, graph []byte, input, plan string, revision string) {
	h.t.Helper()
	sub := `{"title":"agents ` + id + `","graph":` + string(graph) + `,"initialInput":` + input + `,"runtime":` + plan +
		`,"source":{"repository":"acme/app","branch":"main","revision":"` + revision + `"},"submissionKey":"` + id + `"}`
	if _, err := h.runs().Submit(local(), id, json.RawMessage(sub)); err != nil {
		h.t.Fatalf("submit: %v", err)
	}
}

// readEvents reads a subscription to its close: each event's JSON.
func readEvents(t testing.TB, sub *server.Subscription, until func(string) bool) []string {
	t.Helper()
	var out []string
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for {
		n, err := sub.Stream.Next(ctx)
		if err != nil {
			t.Fatalf("stream ended without a close: %v", err)
		}
		if n.Closed != "" {
			return out
		}
		out = append(out, string(n.Rest))
		if until != nil && until(string(n.Rest)) {
			return out
		}
	}
}

// finish follows the run to its end and returns its terminal result.
func (h *agentHost) finish(id string) string {
	h.t.Helper()
	sub, err := h.runs().Watch(local(), id, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	defer sub.Stream.Close()
	readEvents(h.t, sub, nil)
	st, err := h.runs().Status(local(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(st.Status.TerminalResult)
}

// logs replays the finished run's log messages, one a line.
func (h *agentHost) logs(id string) string {
	h.t.Helper()
	return strings.Join(logMessages(h.t, h.runs(), id), "\n")
}

// logMessages replays a finished run's log messages, in order.
func logMessages(t testing.TB, b *runs.Backend, id string) []string {
	t.Helper()
	sub, err := b.Logs(local(), id, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stream.Close()
	var msgs []string
	for _, ev := range readEvents(t, sub, nil) {
		var m struct {
			Record struct{ Message string } `json:"record"`
		}
		if err := json.Unmarshal([]byte(`{"x":0`+ev+`}`), &m); err != nil {
			t.Fatalf("log event %s: %v", ev, err)
		}
		msgs = append(msgs, m.Record.Message)
	}
	return msgs
}

// branch is the run's delivery branch.
func (h *agentHost) branch(id string) string {
	return workspace.Branch(h.runs().TenantKey(identity.Local().Tenant), id)
}

// The example review loop runs on both fake CLIs: the writer revises
// NOTES.md until the reviewer approves, then delivery opens a pull request
// from the run's branch, whose commit holds both revisions.
func TestAgentsExampleReviewLoop(t *testing.T) {
	graph, err := os.ReadFile("../examples/agents/review-loop.json")
	if err != nil {
		t.Fatal(err)
	}
	input, _ := os.ReadFile("../examples/agents/input.json")
	for _, tc := range []struct{ harness, key string }{{"codex", "OPENAI_API_KEY"}, {"claude", "ANTHROPIC_API_KEY"}} {
		t.Run(tc.harness, func(t *testing.T) {
			t.Setenv(tc.key, "example-key")
			cli, _ := filepath.Abs("../examples/agents/bin/" + tc.harness)
			plan, _ := os.ReadFile("../examples/agents/runtime-" + tc.harness + ".json")
			h := startConfinedAgentHost(t, tc.harness, cli, tc.key)
			h.submit("loop", graph, string(input), string(plan), h.remote.Head())
			if got := h.finish("loop"); got != `{"status":"succeeded","output":{"summary":"NOTES.md revision 2"}}` {
				t.Fatalf("terminal %s\n%s", got, h.logs("loop"))
			}
			head := h.remote.Ref("refs/heads/" + h.branch("loop"))
			notes, ok := h.remote.Show(head, "NOTES.md")
			if !ok || strings.Count(notes, "- revision") != 2 {
				t.Fatalf("delivered NOTES.md %q", notes)
			}
			logs := h.logs("loop")
			for _, line := range []string{"Added revision 1 to NOTES.md.", "Reviewed NOTES.md: rejected.", "Added revision 2 to NOTES.md.",
				"Reviewed NOTES.md: approved.", "delivery: pull request #1 from " + h.branch("loop") + " into main"} {
				if !strings.Contains(logs, line) {
					t.Fatalf("logs lack %q:\n%s", line, logs)
				}
			}
		})
	}
}

// replayCLI installs engine/harness's replaying fake as codex: turn 0 runs
// action, then prints events.
func replayCLI(t *testing.T, action string, events ...string) (cli, dir string) {
	t.Helper()
	dir = t.TempDir()
	agenttest.FakeCLIDir(t, dir, map[string]string{"bin/codex": agenttest.FakeCLIScript(t), "actions/0": action + "\n",
		"events/0": strings.Join(events, "\n") + "\n"})
	return filepath.Join(dir, "bin", "codex"), dir
}

// A two-node run: the agent's edit is delivered on the run's branch;
// attach shows the agent's lines while it runs, logs replay them after.
func TestAgentRunAttachLogsDelivery(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-secret")
	say := func(text string) string {
		b, _ := json.Marshal(map[string]any{"type": "item.completed", "item": map[string]any{"type": "agent_message", "text": text}})
		return "printf '%s\\n' '" + string(b) + "'"
	}
	// The agent edits and says so, waits for the test's go file, says more
	// and finishes.
	cli, dir := replayCLI(t,
		`printf 'improved\n' > NOTES.md; `+say("Edited NOTES.md.")+`; while [ ! -f "$d/go" ]; do sleep 0.01; done; `+say("Checking the edit."),
		`{"type":"thread.started","thread_id":"th-1"}`,
		`{"type":"item.completed","item":{"type":"agent_message","text":"{\"summary\":\"edited\"}"}}`,
		`{"type":"turn.completed"}`)
	h := startConfinedAgentHost(t, "codex", cli, "OPENAI_API_KEY")
	h.submit("two", agenttest.TwoNodes(t), "null", agenttest.TwoNodesPlan, h.remote.Head())

	// Once the agent's first line is in the logs, it runs: attach.
	logs, err := h.runs().Logs(local(), "two", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := readEvents(t, logs, func(ev string) bool { return strings.Contains(ev, "Edited NOTES.md.") })
	logs.Stream.Close()
	var rec struct {
		Execution string `json:"execution"`
	}
	_ = json.Unmarshal([]byte(`{"x":0`+lines[len(lines)-1]+`}`), &rec)
	attach, err := h.runs().Attach(local(), "two", rec.Execution)
	if err != nil {
		t.Fatal(err)
	}
	if first := readEvents(t, attach, func(string) bool { return true }); !strings.Contains(first[0], `"working"`) {
		t.Fatalf("attach began with %s", first[0])
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	live := strings.Join(readEvents(t, attach, nil), "\n")
	if !strings.Contains(live, `{"type":"output","text":"Checking the edit."}`) || !strings.Contains(live, `{"type":"output","text":"{\"summary\":\"edited\"}"}`) || !strings.HasSuffix(live, `{"type":"settled"}`) {
		t.Fatalf("attach events:\n%s", live)
	}
	if got := h.finish("two"); got != `{"status":"succeeded","output":null}` {
		t.Fatalf("terminal %s\n%s", got, h.logs("two"))
	}
	head := h.remote.Ref("refs/heads/" + h.branch("two"))
	if notes, ok := h.remote.Show(head, "NOTES.md"); !ok || notes != "improved\n" {
		t.Fatalf("delivered commit %s lacks the edit: %q", head, notes)
	}
	all := h.logs("two")
	for _, line := range []string{"workspace: acme/app at " + h.remote.Head() + " is ready", "Edited NOTES.md.", `{"summary":"edited"}`,
		"delivery: pushed " + head + " to branch " + h.branch("two") + " of acme/app", "delivery: opened: pull request #1 is open"} {
		if !strings.Contains(all, line) {
			t.Fatalf("logs lack %q:\n%s", line, all)
		}
	}
	if strings.Contains(all, "sk-test-secret") {
		t.Fatal("the key reached the logs")
	}
}

// A revision the repository does not have fails the run before any agent
// starts.
func TestUnknownRevisionFailsBeforeAnyAgent(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test")
	cli, dir := replayCLI(t, "", `{"type":"turn.completed"}`)
	h := startAgentHost(t, "codex", cli, "OPENAI_API_KEY")
	missing := strings.Repeat("ab", 20)
	h.submit("bad", agenttest.TwoNodes(t), "null", agenttest.TwoNodesPlan, missing)
	if got := h.finish("bad"); got != `{"status":"failed","reason":"revision_not_found"}` {
		t.Fatalf("terminal %s", got)
	}
	if logs := h.logs("bad"); !strings.Contains(logs, "the repository could not be cloned at the requested revision") || strings.Contains(logs, missing) {
		t.Fatalf("logs:\n%s", logs)
	}
	if n, _ := os.ReadFile(filepath.Join(dir, "count")); strings.TrimSpace(string(n)) != "0" {
		t.Fatalf("%s agent processes ran", n)
	}
	// A repository the host does not serve is refused at submit.
	_, err := h.runs().Submit(local(), "other", json.RawMessage(`{"title":"t","graph":`+string(agenttest.TwoNodes(t))+`,"initialInput":null,"runtime":`+
		agenttest.TwoNodesPlan+`,"source":{"repository":"acme/other","branch":"main","revision":"`+missing+`"},"submissionKey":"o"}`))
	pe, ok := err.(*protocol.Error)
	if details, _ := protocol.Marshal(pe.Details); !ok || string(details) != `{"reason":"repository is not served: acme/other"}` {
		t.Fatalf("unserved repository: %v", err)
	}
}
