package webui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/engine/harness/sandbox/sandboxtest"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/internal/wiretest"
)

// chromiumPath is Debian's Chromium, the browser these tests drive.
const chromiumPath = "/usr/bin/chromium"

// waitBound bounds each test's browser session so that a broken page fails
// the test instead of hanging it; no assertion depends on it.
const waitBound = 2 * time.Minute

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// withCleanup runs the tests, then removes the binary they built.
type withCleanup struct{ *testing.M }

func (w withCleanup) Run() int {
	code := w.M.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	return code
}

// TestMain runs the tests and fails them when any left a goroutine
// running.
func TestMain(m *testing.M) { testkit.Main(withCleanup{m}) }

// needBrowser skips the test when Chromium is missing, unless
// OECP_REQUIRE_BROWSER=1, where that fails it.
func needBrowser(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("OECP_REQUIRE_BROWSER") == "1" {
			t.Fatalf("%s is missing and OECP_REQUIRE_BROWSER=1", chromiumPath)
		}
		t.Skipf("browser test skipped: no %s (install chromium, or set OECP_REQUIRE_BROWSER=1 to make this fail)", chromiumPath)
	}
}

// oecpBinary builds cmd/oecp once for every test of the package.
func oecpBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "oecp-webui-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath, buildErr = wiretest.BuildBinary(dir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// served is a running `oecp serve`.
type served struct {
	addr string // 127.0.0.1:PORT
	base string // http://127.0.0.1:PORT
	ws   string // ws://127.0.0.1:PORT/oecp
	// stop ends it with SIGTERM and waits for it to exit (also at cleanup);
	// kill ends it with SIGKILL, as a crash does.
	stop, kill func()
}

var servingURL = regexp.MustCompile(`url=ws://(127\.0\.0\.1:\d+)/oecp`)

// serve starts `oecp serve` on a free loopback port with an in-memory
// store and the extra flags (a later flag wins over these defaults).
func serve(t *testing.T, args ...string) served {
	t.Helper()
	needBrowser(t)
	if slices.Contains(args, "--harness") {
		args = append(args, sandboxtest.ServeFlags(t)...)
	}
	cmd := exec.Command(oecpBinary(t), append([]string{"serve", "--listen", "127.0.0.1:0", "--store", "memory"}, args...)...)
	stderr := testkit.StartStderr(t, cmd)
	var once sync.Once
	end := func(sig syscall.Signal) func() {
		return func() {
			once.Do(func() {
				_ = cmd.Process.Signal(sig)
				_ = cmd.Wait()
			})
		}
	}
	stop := end(syscall.SIGTERM)
	t.Cleanup(stop)
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if m := servingURL.FindStringSubmatch(lines.Text()); m != nil {
			go func() {
				for lines.Scan() {
				}
			}()
			return served{addr: m[1], base: "http://" + m[1], ws: "ws://" + m[1] + "/oecp", stop: stop, kill: end(syscall.SIGKILL)}
		}
	}
	t.Fatalf("oecp serve ended before serving: %v", lines.Err())
	return served{}
}

// call sends one request to the server as a client of its own.
func (s served) call(t *testing.T, token, method string, params, result any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	c, err := client.Dial(ctx, s.ws, client.DialOptions{Token: token, AllowPlaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Call(ctx, method, params, result); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
}

// apply admits graph with input and returns the new run's id.
func (s served) apply(t *testing.T, token string, graph json.RawMessage, input string) string {
	t.Helper()
	var res struct {
		RunID string `json:"runId"`
	}
	s.call(t, token, "apply", map[string]any{"graph": graph, "input": json.RawMessage(input),
		"idempotencyKey": fmt.Sprintf("test-%d", time.Now().UnixNano())}, &res)
	return res.RunID
}

// gates is a directory of gate files for testdata/gate.sh workers and the
// --workers file that declares them.
type gates struct {
	dir     string
	workers string
}

// newGates declares the command workers gate.<name>@1 of the tests: each
// runs testdata/gate.sh with its mode and gate file.
func newGates(t *testing.T) gates {
	t.Helper()
	dir := t.TempDir()
	text := json.RawMessage(`{"kind":"record","fields":{"text":{"required":true,"type":{"kind":"string"}}}}`)
	null := json.RawMessage(`{"kind":"null"}`)
	verdict := map[string][]string{"verdict": {"approved", "rejected"}}
	entry := func(name, kind, mode string) map[string]any {
		e := map[string]any{"worker": "gate." + name + "@1", "kind": kind, "input": text, "output": text,
			"argv": gateArgv(t, mode, filepath.Join(dir, name))}
		if kind == "verifier" {
			e["output"], e["signals"], e["diagnostic"] = null, verdict, null
		}
		return e
	}
	list := []map[string]any{
		entry("reviewA", "verifier", "approve"), entry("reviewB", "verifier", "reject"),
		entry("reviewC", "step", "step"), entry("flaky", "step", "flaky"),
	}
	b, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	g := gates{dir: dir, workers: filepath.Join(dir, "workers.json")}
	if err := os.WriteFile(g.workers, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return g
}

// gateArgv runs testdata/gate.sh in mode, gated by the file gate.
func gateArgv(t *testing.T, mode, gate string) []string {
	t.Helper()
	script, err := filepath.Abs("testdata/gate.sh")
	if err != nil {
		t.Fatal(err)
	}
	return []string{"/bin/sh", script, mode, gate}
}

// harness writes a --harness file whose codex agent is testdata/gate.sh,
// gated by the file "agent" of g.
func (g gates) harness(t *testing.T) string {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{"codex": map[string]any{"driver": "command", "argv": gateArgv(t, "agent", filepath.Join(g.dir, "agent"))}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(g.dir, "harness.json")
	if err := os.WriteFile(file, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// open lets the worker gated by name answer.
func (g gates) open(t *testing.T, name, suffix string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(g.dir, name+suffix), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// exampleGraph reads examples/<name>.json with every executable's worker
// replaced by workers[node] and a timeout long enough for any test.
func exampleGraph(t *testing.T, name string, workers map[string]string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var g map[string]any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if w, ok := workers[fmt.Sprint(n["name"])]; ok {
			n["worker"], n["timeoutMs"] = w, 600000
		}
		for _, key := range []string{"children", "branches"} {
			kids, _ := n[key].([]any)
			for _, k := range kids {
				if m, ok := k.(map[string]any); ok {
					walk(m)
				}
			}
		}
	}
	walk(g["root"].(map[string]any))
	out, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpPage logs what a failed test's page showed.
func dumpPage(t *testing.T, tab context.Context) {
	ctx, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	t.Logf("page at failure (%v):\n%s", err, text)
}

// browse opens a new headless Chromium with a fresh profile, sized like a
// laptop screen, and returns its tab's context (made with opts).
func browse(t *testing.T, opts ...chromedp.ContextOption) context.Context {
	t.Helper()
	needBrowser(t)
	flags := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), flags...)
	tab, cancelTab := chromedp.NewContext(actx, opts...)
	t.Cleanup(func() {
		if t.Failed() {
			dumpPage(t, tab)
		}
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return tab
}

// run runs browser actions and fails the test with what it was doing.
func run(t *testing.T, tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, waitBound)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs one browser action that reads a value.
func value[T any](t *testing.T, tab context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, waitBound)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// until waits for a JavaScript expression to be true, checked at every
// change of the page.
func until(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0))
}

// clickLive clicks the element sel names once there is one, found and
// clicked in one evaluation: a list the page renders again at each update
// (runs, executions) replaces its elements between a lookup and a click,
// which chromedp.Click reports as a node it cannot find.
func clickLive(sel string) chromedp.Action[chromedp.Void] {
	return until(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true })()`, sel))
}

// nodeIs waits until the graph shows node in state.
func nodeIs(node, state string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`.graph [data-node=%q][data-state=%q]`, node, state)))
}

// textOf reads an element's text.
func textOf(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	return strings.TrimSpace(value(t, tab, "read "+sel, chromedp.Text(chromedp.CSS(sel))))
}

// screenshot saves the page as docs/<name>.png when OECP_UPDATE_SCREENSHOTS=1.
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	if os.Getenv("OECP_UPDATE_SCREENSHOTS") != "1" {
		return
	}
	png := value(t, tab, "screenshot "+name, chromedp.CaptureScreenshot())
	if err := os.WriteFile(filepath.Join("..", "docs", name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
