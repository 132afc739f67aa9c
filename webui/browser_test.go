package webui_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// runRow is the runs page's row of a run in a phase.
func runRow(id, phase string) string {
	return fmt.Sprintf(`tr[data-run=%q][data-phase=%q]`, id, phase)
}

func TestRunsPageListsASubmittedRun(t *testing.T) {
	s := serve(t)
	tab := browse(t)
	id := s.apply(t, "", exampleGraph(t, "one-step", nil), `{"text":"hi"}`)
	run(t, tab, "runs page lists the run",
		chromedp.Navigate(s.base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(runRow(id, "succeeded"))),
		chromedp.WaitVisible(chromedp.CSS(`#connection[data-state="open"]`)))
	run(t, tab, "its link opens the run's page",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-run=%q] a`, id))),
		nodeIs("echo", "succeeded"),
		nodeIs("done", "succeeded"),
		chromedp.WaitVisible(chromedp.CSS(`.result [data-status="succeeded"]`)))
	path := value(t, tab, "read the address", chromedp.Evaluate[string](`location.pathname`))
	if path != "/ui/runs/"+id {
		t.Fatalf("run page address %q, want /ui/runs/%s", path, id)
	}
}

// The graph of examples/parallel-quorum.json (its workers replaced by gated
// command workers) is drawn, and its nodes change state as the run goes:
// all three reviews run, the live output of one is attached, the first two
// to answer succeed, the third is voided and the run succeeds.
func TestGraphFollowsTheRun(t *testing.T) {
	g := newGates(t)
	s := serve(t, "--workers", g.workers)
	tab := browse(t)
	graph := exampleGraph(t, "parallel-quorum", map[string]string{
		"reviewA": "gate.reviewA@1", "reviewB": "gate.reviewB@1", "reviewC": "gate.reviewC@1"})
	id := s.apply(t, "", graph, `{"text":"proposal"}`)
	run(t, tab, "the graph is drawn with its reviews running",
		chromedp.Navigate(s.base+"/ui/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS(`.graph .kind-seq[data-node="main"] .kind-par[data-node="reviews"]`)),
		nodeIs("reviewA", "running"), nodeIs("reviewB", "running"), nodeIs("reviewC", "running"),
		nodeIs("quorate", "pending"))
	run(t, tab, "attach shows reviewC's live lines",
		chromedp.Click(chromedp.CSS(`.graph [data-node="reviewC"]`)),
		until(`document.querySelectorAll('.output li').length >= 3`))
	if out := textOf(t, tab, ".output"); !strings.Contains(out, "reviewC line") {
		t.Fatalf("attached output %q, want reviewC's lines", out)
	}
	g.open(t, "reviewA", ".go")
	run(t, tab, "reviewA succeeds", nodeIs("reviewA", "succeeded"), nodeIs("reviewB", "running"))
	screenshot(t, tab, "ui-run")
	run(t, tab, "the runs page shows the run mid-way",
		chromedp.Navigate(s.base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(runRow(id, "running"))),
		until(fmt.Sprintf(`document.querySelector('tr[data-run=%q] .active').textContent.includes('reviewB')`, id)))
	screenshot(t, tab, "ui-runs")
	run(t, tab, "back to the run",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-run=%q] a`, id))),
		nodeIs("reviewA", "succeeded"))
	g.open(t, "reviewB", ".go")
	run(t, tab, "the quorum is reached",
		nodeIs("reviewB", "succeeded"), nodeIs("reviewC", "voided"), nodeIs("quorate", "succeeded"),
		chromedp.WaitVisible(chromedp.CSS(`.run-head .phase[data-phase="succeeded"]`)))
	if tl := textOf(t, tab, ".timeline"); !strings.Contains(tl, "reviewA started") || !strings.Contains(tl, "run finished") {
		t.Fatalf("timeline %q", tl)
	}
}

// A failure with no route holds the run: the node is marked held, and
// Retry (confirmed) runs it again.
func TestHeldFailureIsRetried(t *testing.T) {
	g := newGates(t)
	s := serve(t, "--workers", g.workers)
	tab := browse(t)
	id := s.apply(t, "", exampleGraph(t, "one-step", map[string]string{"echo": "gate.flaky@1"}), `{"text":"hi"}`)
	run(t, tab, "the step runs", chromedp.Navigate(s.base+"/ui/runs/"+id), nodeIs("echo", "running"))
	g.open(t, "flaky", ".go")
	run(t, tab, "its failure holds the run",
		nodeIs("echo", "held"),
		chromedp.WaitVisible(chromedp.CSS(`.run-head .phase[data-phase="held"]`)),
		chromedp.WaitEnabled(chromedp.CSS(`button[data-action="retry"]`)))
	if tl := textOf(t, tab, ".timeline"); !strings.Contains(tl, "echo failed: crash") {
		t.Fatalf("timeline %q, want the failure", tl)
	}
	run(t, tab, "suspend and resume, each confirmed",
		chromedp.Click(chromedp.CSS(`button[data-action="suspend"]`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button[value="ok"]`)),
		chromedp.WaitEnabled(chromedp.CSS(`button[data-action="resume"]`)),
		until(`document.querySelector('button[data-action="retry"]').disabled`),
		// A disabled action says why.
		until(`document.querySelector('button[data-action="retry"]').title === 'Dispatch is suspended: resume the run before retrying.'`),
		until(`document.querySelector('.run-meta').textContent.includes('dispatch suspended')`),
		chromedp.Click(chromedp.CSS(`button[data-action="resume"]`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button[value="ok"]`)),
		chromedp.WaitEnabled(chromedp.CSS(`button[data-action="retry"]`)))
	g.open(t, "flaky", ".ok")
	run(t, tab, "retry, confirmed, runs it again",
		chromedp.Click(chromedp.CSS(`button[data-action="retry"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog.confirm[open]`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button[value="ok"]`)),
		nodeIs("echo", "succeeded"),
		chromedp.WaitVisible(chromedp.CSS(`.run-head .phase[data-phase="succeeded"]`)),
		until(`document.querySelector('.action-message').textContent === 'Retry granted.'`))
}

// Stop (force), confirmed, cuts the running execution off and ends the run;
// a cancelled confirmation sends nothing.
func TestForceStop(t *testing.T) {
	g := newGates(t)
	s := serve(t, "--workers", g.workers)
	tab := browse(t)
	id := s.apply(t, "", exampleGraph(t, "one-step", map[string]string{"echo": "gate.reviewC@1"}), `{"text":"hi"}`)
	run(t, tab, "a cancelled confirmation changes nothing",
		chromedp.Navigate(s.base+"/ui/runs/"+id), nodeIs("echo", "running"),
		chromedp.Click(chromedp.CSS(`button[data-action="force"]`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button[value="cancel"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog.confirm`)),
		nodeIs("echo", "running"))
	run(t, tab, "a confirmed force stop ends the run",
		chromedp.Click(chromedp.CSS(`button[data-action="force"]`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button[value="ok"]`)),
		nodeIs("echo", "voided"),
		chromedp.WaitVisible(chromedp.CSS(`.run-head .phase[data-phase="stopped"]`)),
		until(`document.querySelector('.result').textContent === 'Stopped (force) without a result.'`))
}

// With --auth-tokens the page asks for a token: a wrong one is refused, the
// right one signs in, and it never shows in the address.
func TestSignInWithAToken(t *testing.T) {
	const token = "ui-test-token-5e6b"
	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(file, []byte(`[{"token":"`+token+`","principal":"alice","tenant":"a","expiresAt":"2999-01-01T00:00:00Z"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := serve(t, "--auth-tokens", file)
	tab := browse(t)
	id := s.apply(t, token, exampleGraph(t, "one-step", nil), `{"text":"hi"}`)
	run(t, tab, "the page asks for a token",
		chromedp.Navigate(s.base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`form.signin`)),
		chromedp.WaitVisible(chromedp.CSS(`#connection[data-state="refused"]`)))
	run(t, tab, "a wrong token is refused",
		chromedp.SendKeys(chromedp.CSS(`#token`), "not-the-token"),
		chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)),
		until(`document.querySelector('.signin-reason')?.textContent === 'The server refused this token.'`))
	run(t, tab, "the right token signs in",
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(runRow(id, "succeeded"))))
	href := value(t, tab, "read the address", chromedp.Evaluate[string](`location.href`))
	if strings.Contains(href, token) {
		t.Fatalf("the token is in the address %q", href)
	}
}
