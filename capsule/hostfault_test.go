package capsule_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/engine/harness/sandbox/sandboxtest"
	"github.com/oecp/oecp/internal/agenttest"
)

// busyUID is the one agent UID of TestHostFaultKeepsTheStepsAttempt's
// sandbox; a process the test starts holds it.
const busyUID = 2090000123

// A step whose sandbox the host cannot set up (its one agent UID is
// taken) does not spend its attempt: the run's log says why, the run
// waits, and once the UID is free the same step (attempts: 1) runs and
// the run succeeds.
func TestHostFaultKeepsTheStepsAttempt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("agent UIDs are leased only by a root server")
	}
	t.Setenv("OPENAI_API_KEY", "sk-test")
	busy := exec.Command("sleep", "600")
	busy.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: busyUID, Gid: busyUID}}
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Process.Kill(); _ = busy.Wait() }()

	cli, _ := replayCLI(t, `printf 'improved\n' > NOTES.md`,
		`{"type":"thread.started","thread_id":"th-1"}`,
		`{"type":"item.completed","item":{"type":"agent_message","text":"{\"summary\":\"edited\"}"}}`,
		`{"type":"turn.completed"}`)
	confine := func(h *harness.Config, runDir string) *sandbox.Host {
		return sandboxtest.Require(t, sandbox.Config{Hide: []string{runDir}, Programs: h.Programs(),
			UIDs: sandbox.UIDRange{From: busyUID, To: busyUID}, LeaseDir: filepath.Join(t.TempDir(), "leases")})
	}
	h := newAgentHost(t, "codex", map[string]any{"argv": []string{cli}, "env": []string{"OPENAI_API_KEY"}}, capsule.Options{}, confine)
	h.submit("busy", agenttest.TwoNodes(t), "null", agenttest.TwoNodesPlan, h.remote.Head())

	logs, err := h.runs().Logs(local(), "busy", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const why = "could not start on this server: the server could not set up the agent's sandbox; its attempt is not spent"
	readEvents(t, logs, func(ev string) bool { return strings.Contains(ev, why) })
	logs.Stream.Close()
	_ = busy.Process.Kill()
	_ = busy.Wait()

	if got := h.finish("busy"); got != `{"status":"succeeded","output":null}` {
		t.Fatalf("terminal %s\n%s", got, h.logs("busy"))
	}
	head := h.remote.Ref("refs/heads/" + h.branch("busy"))
	if notes, ok := h.remote.Show(head, "NOTES.md"); !ok || notes != "improved\n" {
		t.Fatalf("delivered commit %s lacks the edit: %q", head, notes)
	}
}
