package webui_test

import (
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// sentWatches records the params of every watch request the page sends.
type sentWatches struct {
	mu     sync.Mutex
	params []map[string]any
}

func (w *sentWatches) listen(ev any) {
	sent, ok := ev.(*network.EventWebSocketFrameSent)
	if !ok || sent.Response == nil {
		return
	}
	var frame struct {
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	}
	if json.Unmarshal(sent.Response.PayloadData, &frame) == nil && frame.Method == "watch" {
		w.mu.Lock()
		w.params = append(w.params, frame.Params)
		w.mu.Unlock()
	}
}

func (w *sentWatches) last() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.params) == 0 {
		return nil
	}
	return w.params[len(w.params)-1]
}

// When the server goes away (it crashes: SIGKILL) the page says it is
// disconnected; when it is back (same address, same SQLite directory) the
// page reconnects by itself and its watch resumes after the last cursor it
// had: the events recorded meanwhile appear once, none twice, and the run
// can be acted on again.
func TestWatchResumesAfterTheServerRestarts(t *testing.T) {
	g := newGates(t)
	data := filepath.Join(t.TempDir(), "data")
	args := []string{"--store", "sqlite", "--data", data, "--workers", g.workers}
	s := serve(t, args...)
	var watches sentWatches
	tab := browse(t, chromedp.WithListener(watches.listen))
	id := s.apply(t, "", exampleGraph(t, "one-step", map[string]string{"echo": "gate.reviewC@1"}), `{"text":"hi"}`)
	run(t, tab, "the step runs", chromedp.Navigate(s.base+"/ui/runs/"+id), nodeIs("echo", "running"))
	seen := value(t, tab, "read the last cursor", chromedp.Evaluate[string](`document.querySelector('.timeline li:last-child').title`))
	s.kill()
	run(t, tab, "the page shows it is disconnected", chromedp.WaitVisible(chromedp.CSS(`#connection[data-state="closed"]`)))
	g.open(t, "reviewC", ".go")
	serve(t, append(args, "--listen", s.addr)...)
	run(t, tab, "it reconnects and shows the crashed execution holding the run",
		chromedp.WaitVisible(chromedp.CSS(`#connection[data-state="open"]`)),
		nodeIs("echo", "held"),
		until(`document.querySelectorAll('.timeline li[data-type="node_begin"]').length === 1`),
		until(`document.querySelectorAll('.timeline li[data-type="phase"]').length === 1`),
		chromedp.WaitEnabled(chromedp.CSS(`button[data-action="retry"]`)),
		chromedp.Click(chromedp.CSS(`button[data-action="retry"]`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button[value="ok"]`)),
		nodeIs("echo", "succeeded"),
		chromedp.WaitVisible(chromedp.CSS(`.run-head .phase[data-phase="succeeded"]`)))
	if p := watches.last(); p["runId"] != id || p["fromCursor"] != seen {
		t.Fatalf("the page resumed its watch with %v, want runId %s after %s", p, id, seen)
	}
	if n := value(t, tab, "count admissions", chromedp.Evaluate[int](`document.querySelectorAll('.timeline li[data-type="phase"]').length`)); n != 1 {
		t.Fatalf("%d admission entries in the timeline, want 1", n)
	}
}
