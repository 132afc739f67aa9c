package templates_test

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/oecp/oecp/templates"
)

// FuzzTaskInput builds a delivering software-change's input from any task
// and issue reference: a task it takes goes in verbatim with the issue,
// and the value fits the graph's initial input; a task it refuses is
// ErrTask.
func FuzzTaskInput(f *testing.F) {
	tpl, err := templates.Lookup(templates.SoftwareChange)
	if err != nil {
		f.Fatal(err)
	}
	g, err := tpl.Graph(templates.DeliveryShip)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("# Fix \"quotes\"\n\n- a \\ backslash, <html> & `code`\n\u00e9\n", "acme/other#7")
	f.Add(" \n\t", "")
	f.Add("bad \xff utf-8", "#1\x00")
	f.Add("nul\x00", "\u2028")
	f.Fuzz(func(t *testing.T, task, ref string) {
		raw, err := templates.TaskInput(g, task)
		if err != nil {
			if !errors.Is(err, templates.ErrTask) {
				t.Fatalf("task refused without ErrTask: %v", err)
			}
			return
		}
		if raw, err = templates.Closing(g, raw, ref); err != nil {
			t.Fatalf("closing: %v", err)
		}
		if err := g.InitialInput.Validate(raw); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		var in map[string]string
		if err := json.Unmarshal(raw, &in); err != nil || in["task"] != task {
			t.Fatalf("the task did not go in verbatim: %s (%v)", raw, err)
		}
		if utf8.ValidString(ref) && in[templates.FieldCloses] != ref {
			t.Fatalf("the issue did not go in verbatim: %s", raw)
		}
	})
}
