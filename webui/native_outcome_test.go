package webui_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// An agent execution that fails shows as failed on its run's page, with
// its outcome and the last line it wrote (why it failed), although the
// run succeeds: its graph does not route the failure.
func TestNativeExecutionShowsItsOutcome(t *testing.T) {
	harness := filepath.Join(t.TempDir(), "harness.json")
	if err := os.WriteFile(harness, []byte(`{"codex":{"driver":"command","argv":["/bin/sh","/nonexistent/agent.sh"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := serve(t, "--harness", harness)
	tab := browse(t)
	const id = "ui-native-fails"
	s.call(t, "", "run/submit", agentSubmission(id), nil)
	run(t, tab, "the failed execution shows as failed, the run as succeeded",
		chromedp.Navigate(s.base+"/ui/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS(`.run-head .phase[data-phase="succeeded"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.executions [data-node="draft"][data-state="failed"]`)))
	// The page shows states in capitals (CSS); compare the words.
	state := strings.ToLower(textOf(t, tab, `.executions [data-node="draft"] .node-state`))
	for _, want := range []string{"failed (crash: declared_failure)", "cannot open /nonexistent/agent.sh"} {
		if !strings.Contains(state, want) {
			t.Errorf("the execution's state reads %q, want it to say %q", state, want)
		}
	}
	if events := strings.ToLower(textOf(t, tab, ".timeline")); !strings.Contains(events, "draft failed (crash: declared_failure)") {
		t.Errorf("the events do not say how draft ended:\n%s", events)
	}
}
