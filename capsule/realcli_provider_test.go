package capsule_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/internal/modelapi"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/templates"
)

// providerStall is the --agent-stall-timeout of these runs: the bound of
// a CLI that retries an unreachable provider in silence.
const providerStall = 5 * time.Second

// refusedStall is the --agent-stall-timeout of a run whose key the
// provider refuses: the CLI reports the refusal as soon as it asks, so
// the bound only has to outlast a CLI's start on a loaded machine, and
// never decides the outcome.
const refusedStall = 2 * time.Minute

// closedBaseURL is a loopback address where nothing listens: a provider
// that cannot be reached.
func closedBaseURL(t *testing.T) string {
	t.Helper()
	return "http://" + testkit.FreeAddr(t)
}

// TestRealAgentRunEndsOnProviderFailure: a single-worker run of each real
// CLI, in the agent sandbox, whose provider refuses the key (401 on every
// request) ends failed worker_refused with a log line naming the 401; one
// whose provider cannot be reached ends failed by the CLI's own retry
// limit (worker_crashed) or the stall timeout (worker_timed_out), with a
// log line saying which, never succeeded and never held.
func TestRealAgentRunEndsOnProviderFailure(t *testing.T) {
	tpl, err := templates.Lookup(templates.SingleWorker)
	if err != nil {
		t.Fatal(err)
	}
	g, err := tpl.JSON(templates.DeliveryNone)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := graph.Decode(g)
	if err != nil {
		t.Fatal(err)
	}
	input, err := templates.TaskInput(spec, "Add a NOTES.md saying hello.")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range realAgents(modelapi.CodexNew) {
		for _, failure := range []string{"401", "unreachable"} {
			t.Run(tc.harness+"/"+failure, func(t *testing.T) {
				cli := tc.cli(t)
				t.Setenv(tc.key, "sk-test-"+tc.harness)
				// Claude Code's retries of an unreachable API are cut to
				// one; a refused key needs none, and a declared value as
				// short as "1" would be redacted out of "HTTP 401".
				env := tc.env
				if failure == "401" {
					env = []string{tc.key}
				}
				t.Setenv("CLAUDE_CODE_MAX_RETRIES", "1")
				steps := slices.Repeat([]modelapi.Step{{Status: 401}}, 20)
				api := tc.api(steps...)
				defer api.close()
				base := api.base
				if failure == "unreachable" {
					base = closedBaseURL(t)
					if tc.harness == harness.HarnessCodex {
						base += "/v1"
					}
				}
				remote := gittest.NewRemote(t)
				h := parseHarness(t, tc.harness, map[string]any{"argv": []string{cli}, "env": env, "baseUrl": base})
				if failure == "401" {
					h.SetStallTimeout(refusedStall)
				} else {
					h.SetStallTimeout(providerStall)
				}
				repos := reposAt(t, "acme/app", remote.Dir)
				runDir := t.TempDir()
				o := capsule.Options{Harness: h, Repos: repos, RunDir: runDir, Sandbox: realSandbox(t, h, runDir, base)}
				host := &agentHost{t: t, e: start(t, o), remote: remote}
				e, _ := json.Marshal(env)
				plan := `{"harness":"` + tc.harness + `","provider":"` + tc.provider + `","size":"small","nodes":{"worker":{"kind":"agent","model":"` +
					tc.model + `","env":` + string(e) + `}}}`
				host.submit("provider", g, string(input), plan, remote.Head())
				var end struct{ Status, Reason string }
				got := host.finish("provider")
				_ = json.Unmarshal([]byte(got), &end)
				logs := host.logs("provider")
				switch {
				case end.Status != "failed":
					t.Fatalf("terminal %s\n%s", got, logs)
				case failure == "401" && (end.Reason != "worker_refused" || !strings.Contains(logs, "401")):
					t.Fatalf("terminal %s, want worker_refused and a line naming the 401\n%s", got, logs)
				case failure == "unreachable" && end.Reason == "worker_crashed" && !strings.Contains(logs, "provider failure"):
					t.Fatalf("terminal %s without a line naming the provider failure\n%s", got, logs)
				case failure == "unreachable" && end.Reason == "worker_timed_out" && !strings.Contains(logs, "no output from the agent for "+providerStall.String()):
					t.Fatalf("terminal %s without the stall line\n%s", got, logs)
				case failure == "unreachable" && end.Reason != "worker_crashed" && end.Reason != "worker_timed_out":
					t.Fatalf("terminal %s, want worker_crashed or worker_timed_out\n%s", got, logs)
				}
				t.Logf("%s: %s", failure, got)
			})
		}
	}
}
