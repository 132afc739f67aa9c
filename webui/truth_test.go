package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/internal/agenttest"
	"github.com/oecp/oecp/internal/gittest"
)

// runIDAt is a UUIDv7 run id made at t (as `oecp run submit` makes them).
func runIDAt(t time.Time, tail uint64) string {
	ms := uint64(t.UnixMilli())
	return fmt.Sprintf("%08x-%04x-7000-8000-%012x", ms>>16, ms&0xffff, tail)
}

// dial connects to the server under a bound of waitBound; done closes
// the connection and ends the bound.
func (s served) dial(t *testing.T) (ctx context.Context, conn *client.Conn, done func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	conn, err := client.Dial(ctx, s.ws, client.DialOptions{AllowPlaintext: true})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return ctx, conn, func() {
		_ = conn.Close()
		cancel()
	}
}

// waitFinished follows run id's watch until it has finished.
func (s served) waitFinished(t *testing.T, id string) {
	t.Helper()
	ctx, conn, done := s.dial(t)
	defer done()
	f, err := client.FollowRunWatch(ctx, client.FollowOptions{RunID: id, Conn: conn})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for ev := range f.Events() {
		if ev.Status.Phase == "finished" {
			return
		}
	}
	t.Fatalf("the watch of %s ended before it finished: %v", id, f.Err())
}

// waitLog follows run id's log until a record contains want.
func (s served) waitLog(t *testing.T, id, want string) {
	t.Helper()
	ctx, conn, done := s.dial(t)
	defer done()
	f, err := client.FollowRunLogs(ctx, client.FollowOptions{RunID: id, Conn: conn}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for ev := range f.Events() {
		if strings.Contains(ev.Record.Message, want) {
			return
		}
	}
	t.Fatalf("the log of %s ended without %q: %v", id, want, f.Err())
}

// attr reads an attribute of the first element sel matches ("" when absent).
func attr(t *testing.T, tab context.Context, sel, name string) string {
	t.Helper()
	return value(t, tab, "read "+name+" of "+sel, chromedp.Evaluate[string](
		fmt.Sprintf(`document.querySelector(%q)?.getAttribute(%q) || ''`, sel, name)))
}

// TestWebViewTellsTheTruth: a run's age is read from its UUIDv7 id (a run
// made three hours ago is three hours old, not "≥ 0 s" because this tab
// first saw it now); a run this page watched finish (forced) has a
// duration, one that finished unseen has none and says why; a finished
// run's page shows its log lines; and its disabled Force stop says why it
// is disabled.
func TestWebViewTellsTheTruth(t *testing.T) {
	g := newGates(t)
	s := serve(t, "--harness", g.harness(t))
	tab := browse(t)
	live := runIDAt(time.Now(), 1)
	s.call(t, "", "run/submit", agentSubmission(live), nil)
	run(t, tab, "the running run's page shows its age and duration from its id",
		chromedp.Navigate(s.base+"/ui/runs/"+live),
		chromedp.WaitVisible(chromedp.CSS(`.executions [data-node="draft"][data-state="running"]`)),
		until(`/age \d+ s · duration \d+ s/.test(document.querySelector('.run-meta').textContent)`),
		until(`document.querySelector('button[data-action="force"]').disabled === false`))
	run(t, tab, "the run finishes (forced) while the page watches: its duration stays known",
		chromedp.Click(chromedp.CSS(`button[data-action="force"]`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button[value="ok"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.run-head .phase[data-phase="failed"]`)),
		until(`/duration \d+ s/.test(document.querySelector('.run-meta').textContent)`))

	old := runIDAt(time.Now().Add(-3*time.Hour), 2)
	s.call(t, "", "run/submit", agentSubmission(old), nil)
	s.waitLog(t, old, "usage: input 120 tokens")
	s.call(t, "", "run/force", map[string]string{"runId": old}, nil)
	s.waitFinished(t, old)
	run(t, tab, "the runs page ages a run by its id, and says why a duration is unknown",
		chromedp.Navigate(s.base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(runRow(old, "failed"))))
	oldRow := fmt.Sprintf(`tr[data-run=%q]`, old)
	if age := textOf(t, tab, oldRow+" .age"); !strings.HasPrefix(age, "3 h ") {
		t.Errorf("a run made 3 hours ago is %q old", age)
	}
	if d := textOf(t, tab, oldRow+" .duration"); d != "—" || !strings.Contains(attr(t, tab, oldRow+" .duration", "title"), "finished before this page saw it") {
		t.Errorf("duration %q (title %q) of a run that finished unseen", d, attr(t, tab, oldRow+" .duration", "title"))
	}
	if d := textOf(t, tab, fmt.Sprintf(`tr[data-run=%q] .duration`, live)); d == "—" {
		t.Errorf("the run this page saw finish has no duration")
	}
	run(t, tab, "a finished run's page shows its log lines and why Force stop is disabled",
		chromedp.Navigate(s.base+"/ui/runs/"+old),
		chromedp.WaitVisible(chromedp.CSS(`.run-head .phase[data-phase="failed"]`)),
		until(`[...document.querySelectorAll('.logs li')].some((li) => li.textContent.includes('usage: input 120 tokens'))`),
		until(`document.querySelector('button[data-action="force"]').disabled`))
	if why := attr(t, tab, `button[data-action="force"]`, "title"); why != "The run has finished: there is nothing to stop." {
		t.Errorf("the disabled Force stop says %q", why)
	}
	if meta := textOf(t, tab, ".run-meta"); !strings.Contains(meta, "age 3 h ") || !strings.Contains(meta, "duration —") {
		t.Errorf("the finished run's header reads %q", meta)
	}
}

// TestSignInNamesTheCredential: a server that takes JWTs asks for a JWT,
// one with --auth-tokens for an access token of that file.
func TestSignInNamesTheCredential(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"jwks.json":   `{"keys":[]}`,
		"jwt.json":    `{"issuer":"https://idp.example/","audience":"oecp","jwks":"jwks.json","algorithms":["ES256"]}`,
		"tokens.json": `[{"token":"t-1","principal":"alice","tenant":"a","expiresAt":"2999-01-01T00:00:00Z"}]`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		flag, file, label, hint string
	}{
		{"--auth-jwt", "jwt.json", "JWT", "a JWT from the identity provider the server trusts"},
		{"--auth-tokens", "tokens.json", "Access token", "an access token from the server's --auth-tokens file"},
	} {
		s := serve(t, tc.flag, filepath.Join(dir, tc.file))
		tab := browse(t)
		run(t, tab, "the page asks for "+tc.label,
			chromedp.Navigate(s.base+"/ui/"),
			chromedp.WaitVisible(chromedp.CSS(`form.signin`)))
		if got := textOf(t, tab, `form.signin label[for="token"]`); got != tc.label {
			t.Errorf("%s: the sign-in box asks for %q, want %q", tc.flag, got, tc.label)
		}
		if got := textOf(t, tab, `form.signin`); !strings.Contains(got, tc.hint) {
			t.Errorf("%s: the sign-in box does not say %q:\n%s", tc.flag, tc.hint, got)
		}
	}
}

// TestNativeRunShowsItsDelivery: a software-change run delivered with
// --pr shows, in its result panel, the branch it pushed and its pull
// request (its number: the fake forge's repository is a local path).
func TestNativeRunShowsItsDelivery(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../cmd/oecp/testdata/template-agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(dir, "codex")
	if err := os.WriteFile(agent, script, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_API_KEY", "dummy-key")
	remote := gittest.NewRemote(t)
	for name, v := range map[string]any{
		"harness.json": map[string]any{"codex": map[string]any{"argv": []string{agent}, "env": []string{"OPENAI_API_KEY"}}},
		"repos.json":   agenttest.ReposFile(t, remote.Dir),
	} {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := serve(t, "--harness", filepath.Join(dir, "harness.json"), "--repos", filepath.Join(dir, "repos.json"))
	tab := browse(t)
	const id = "ui-deliver-1"
	submit := exec.Command(oecpBinary(t), "run", "submit", "--server", s.ws, "--template", "software-change", "--task", "Add a CHANGE.md",
		"--pr", "--harness", "codex", "--source", "acme/app@main:"+remote.Head(), "--id", id, "--watch")
	if out, err := submit.CombinedOutput(); err != nil {
		t.Fatalf("run submit: %v\n%s", err, out)
	}
	run(t, tab, "the result panel shows the delivery",
		chromedp.Navigate(s.base+"/ui/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS(`.result [data-status="succeeded"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.delivery .pull-request`)))
	if pr := textOf(t, tab, ".delivery .pull-request"); pr != "#1" {
		t.Errorf("pull request %q, want #1", pr)
	}
	if d := textOf(t, tab, ".delivery"); !strings.Contains(d, "Delivered branch oecp/run-") || !strings.Contains(d, "into main (opened)") {
		t.Errorf("delivery reads %q", d)
	}
}
