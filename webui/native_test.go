package webui_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
		clickLive(fmt.Sprintf(`tr[data-run=%q] a`, id)),
		chromedp.WaitVisible(chromedp.CSS(`.executions [data-node="draft"][data-state="running"]`)),
		clickLive(`.executions [data-node="draft"]`),
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
	run(t, tab, "its exports are offered and read",
		chromedp.WaitVisible(chromedp.CSS(`.exports a[data-export="trace"][href="/oecp/runs/`+id+`/export?format=trace"]`)),
		chromedp.Click(chromedp.CSS(`.exports a[data-export="semantic"]`)),
		until(`document.querySelector('.export-message').dataset.kind === 'ok'`))
}

// Signed in with a token, a native run's page reads its exports with that
// token (a plain link could not carry it).
func TestNativeRunExportsWithAToken(t *testing.T) {
	const token = "ui-export-token-9c1d"
	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(file, []byte(`[{"token":"`+token+`","principal":"alice","tenant":"a","expiresAt":"2999-01-01T00:00:00Z"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := serve(t, "--auth-tokens", file, "--harness", newGates(t).harness(t))
	tab := browse(t)
	const id = "ui-export-1"
	s.call(t, token, "run/submit", agentSubmission(id), nil)
	run(t, tab, "sign in on the run's page",
		chromedp.Navigate(s.base+"/ui/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS(`form.signin`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.exports a[data-export="trace"]`)))
	run(t, tab, "the trace is read with the token",
		chromedp.Click(chromedp.CSS(`.exports a[data-export="trace"]`)),
		until(`document.querySelector('.export-message').dataset.kind === 'ok'`))
}
