package webui_test

import (
	"net/http"
	"strings"
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
		chromedp.WaitVisible(chromedp.CSS(`.run-head .phase[data-phase="not found"]`)))
	if got, want := textOf(t, tab, ".run-meta"), "Run does not exist, or your identity cannot see it."; got != want {
		t.Fatalf("page says %q, want %q", got, want)
	}
	// Nothing waits for a run that does not exist.
	page := textOf(t, tab, "main")
	for _, contradiction := range []string{"Waiting for the run's admission", "The run has not finished", "unavailable"} {
		if strings.Contains(page, contradiction) {
			t.Errorf("the page of an unknown run says %q:\n%s", contradiction, page)
		}
	}
	if !strings.Contains(page, "There is no run run-99 on this server.") {
		t.Errorf("the page of an unknown run does not say so:\n%s", page)
	}
}

// The server's root redirects to the web view.
func TestRootRedirectsToTheWebView(t *testing.T) {
	s := serve(t)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(s.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET / answered %d to %q, want 302 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
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
