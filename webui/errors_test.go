package webui_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// A server error reaches the page in plain words: the page of a run that
// does not exist says so.
func TestUnknownRunIsExplained(t *testing.T) {
	s := serve(t)
	tab := browse(t)
	run(t, tab, "open a run that does not exist",
		chromedp.Navigate(s.base+"/ui/runs/run-99"),
		chromedp.WaitVisible(chromedp.CSS(`.run-head .phase[data-phase="unavailable"]`)))
	if got, want := textOf(t, tab, ".run-meta"), "Run does not exist, or your identity cannot see it."; got != want {
		t.Fatalf("page says %q, want %q", got, want)
	}
}

// The errors the actions can meet read as sentences, in the page's own
// code (errors.js) as the browser runs it.
func TestActionErrorsInPlainWords(t *testing.T) {
	s := serve(t)
	tab := browse(t)
	run(t, tab, "open the page", chromedp.Navigate(s.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#connection[data-state="open"]`)))
	got := value(t, tab, "explain errors", chromedp.Evaluate[[]string](`(async () => {
		const {explain} = await import('/ui/assets/js/errors.js');
		const {RpcError, ConnectionLost} = await import('/ui/assets/js/rpc.js');
		const e = (code, data, message = 'x') => explain(new RpcError({code, message, data}));
		return [
			e(-32000, {code: 'NO_RETRYABLE_FRONTIER', details: {reason: 'active'}}),
			e(-32000, {code: 'INVALID_PHASE', details: {dispatchState: 'suspended'}}, 'Lifecycle state denies successor dispatch'),
			e(-32000, {code: 'INVALID_PHASE', details: {currentPhase: 'finished'}}),
			e(-32000, {code: 'GENERATION_CONFLICT', details: {currentGeneration: 3}}),
			e(-32603, {code: 'INTERNAL_ERROR'}, 'Internal error'),
			explain(new ConnectionLost()),
		];
	})()`, chromedp.EvalAwaitPromise))
	want := []string{
		"An execution is still running: wait for it to end before retrying.",
		"Not possible while dispatch is suspended: resume the run first.",
		"Not possible while the cluster is finished.",
		"The cluster changed while you were looking (it is now at generation 3). Look again and retry.",
		"The server failed internally (INTERNAL_ERROR).",
		"Not connected to the server; the page reconnects by itself — try again in a moment.",
	}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("explain #%d: %q, want %q", i, got[i], want[i])
		}
	}
}
