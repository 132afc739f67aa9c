package webui_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// agentSubmission is a native run of one agent step, then succeed.
func agentSubmission(runID string) json.RawMessage {
	return json.RawMessage(`{"runId":"` + runID + `","submission":{"title":"review the proposal",` +
		`"graph":{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":{"policy":"policy.default@1","default":"deny"},` +
		`"root":{"kind":"seq","name":"main","state":{"kind":"null"},"promotedStatePaths":[],"children":[` +
		`{"kind":"step","name":"draft","worker":"agent.draft@1","instructions":"answer null","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":600000,"attempts":1},` +
		`{"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}]}},"initialInput":null,` +
		`"runtime":{"harness":"codex","provider":"openai","size":"tiny","nodes":{"draft":{"kind":"agent","model":"gpt-5.6"}}},` +
		`"source":{"repository":"oecp/oecp","branch":"main","revision":"0123456789abcdef0123456789abcdef01234567"},"submissionKey":"` + runID + `"}}`)
}

// A native run is listed from run/list, its page shows its running
// execution, that execution's live output and the usage its agent turns
// reported, and Force stop (confirmed) ends it.
func TestNativeRunIsListedFollowedAndForced(t *testing.T) {
	s := serve(t, "--harness", newGates(t).harness(t))
	tab := browse(t)
	const id = "ui-native-1"
	s.call(t, "", "run/submit", agentSubmission(id), nil)
	run(t, tab, "the runs page lists the native run",
		chromedp.Navigate(s.base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(runRow(id, "running"))),
		until(fmt.Sprintf(`document.querySelector('tr[data-run=%q] .active').textContent === 'draft'`, id)))
	run(t, tab, "its page shows the running execution",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-run=%q] a`, id))),
		chromedp.WaitVisible(chromedp.CSS(`.executions [data-node="draft"][data-state="running"]`)),
		chromedp.Click(chromedp.CSS(`.executions [data-node="draft"]`)),
		until(`[...document.querySelectorAll('.output li')].some((li) => li.textContent.startsWith('agent line'))`),
		// The usage an agent turn reported shows on its execution.
		until(`(document.querySelector('.executions [data-node="draft"] .node-usage')?.textContent || '') === '120 in (20 cached) · 30 out · $0.0125'`))
	run(t, tab, "force stop, confirmed, ends it",
		chromedp.Click(chromedp.CSS(`button[data-action="force"]`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button[value="ok"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.run-head .phase[data-phase="failed"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.result [data-status="failed"]`)))
	if res := textOf(t, tab, ".result"); !strings.Contains(res, "force_stopped") {
		t.Fatalf("result %q, want force_stopped", res)
	}
}
