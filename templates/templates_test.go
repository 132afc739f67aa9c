package templates_test

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/nativegraph"
	"github.com/oecp/oecp/templates"
)

// variants is every template with every delivery it takes.
func variants() []struct {
	t templates.Template
	d templates.Delivery
} {
	var out []struct {
		t templates.Template
		d templates.Delivery
	}
	for _, t := range templates.List() {
		for _, d := range append([]templates.Delivery{templates.DeliveryNone}, t.Deliveries...) {
			out = append(out, struct {
				t templates.Template
				d templates.Delivery
			}{t, d})
		}
	}
	return out
}

func name(t templates.Template, d templates.Delivery) string {
	if d == templates.DeliveryNone {
		return t.Name
	}
	return t.Name + "--" + string(d)
}

// TestEveryTemplateVerifies: every template, with every delivery it
// takes, decodes from its own JSON and passes native admission's graph
// rules and the production verifier.
func TestEveryTemplateVerifies(t *testing.T) {
	for _, v := range variants() {
		t.Run(name(v.t, v.d), func(t *testing.T) {
			data, err := v.t.JSON(v.d)
			if err != nil {
				t.Fatal(err)
			}
			g, err := graph.Decode(data)
			if err != nil {
				t.Fatalf("decode: %v\n%s", err, data)
			}
			if !nativegraph.IsNative(g) {
				t.Fatal("not read as a native graph")
			}
			res, err := nativegraph.Check(g)
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK() {
				for _, d := range res.Diagnostics {
					t.Errorf("%s %s at %v: %s", d.Severity, d.Code, d.Path, d.Message)
				}
			}
		})
	}
}

// TestSingleWorkerRefusesDelivery: single-worker delivers nothing, so
// --pr and --ship are refused with ErrNoDelivery.
func TestSingleWorkerRefusesDelivery(t *testing.T) {
	tpl, err := templates.Lookup(templates.SingleWorker)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []templates.Delivery{templates.DeliveryPR, templates.DeliveryShip} {
		if _, err := tpl.Graph(d); !errors.Is(err, templates.ErrNoDelivery) {
			t.Errorf("delivery %s: %v", d, err)
		}
	}
}

// TestLookupUnknownNamesTheTemplates: an unknown name is ErrUnknown and
// the error lists the names.
func TestLookupUnknownNamesTheTemplates(t *testing.T) {
	_, err := templates.Lookup("software")
	if !errors.Is(err, templates.ErrUnknown) || !strings.Contains(err.Error(), "single-worker, software-change") {
		t.Fatalf("err %v", err)
	}
}

// TestTaskInputSeedsWorkingFields: the task goes in verbatim (quotes,
// backslashes, Markdown and all), every other required field of the
// initial input is seeded empty, and the value fits the graph's type.
func TestTaskInputSeedsWorkingFields(t *testing.T) {
	tpl, _ := templates.Lookup(templates.SoftwareChange)
	g, _ := tpl.Graph(templates.DeliveryPR)
	text := "# Fix \"quotes\"\n\n- a \\ backslash, <html> & `code`\n\u00e9\n"
	raw, err := templates.TaskInput(g, text)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.InitialInput.Validate(raw); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	var in map[string]string
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"task": text, "summary": "", "acceptanceFeedback": "", "codeFeedback": "", "deliveryFeedback": "", "pullRequest": "", "closes": ""}
	if !maps.Equal(in, want) {
		t.Fatalf("input %v, want %v", in, want)
	}
}

// TestTaskInputRefuses: an empty, oversized or non-text task, and a graph
// whose input has no string task (or needs a non-string field), are
// refused.
func TestTaskInputRefuses(t *testing.T) {
	tpl, _ := templates.Lookup(templates.SingleWorker)
	g, _ := tpl.Graph(templates.DeliveryNone)
	for _, task := range []string{"", " \n\t", strings.Repeat("x", templates.MaxTaskBytes+1), "bad \xff utf-8", "nul\x00"} {
		if _, err := templates.TaskInput(g, task); !errors.Is(err, templates.ErrTask) {
			t.Errorf("task %.20q: %v", task, err)
		}
	}
	for _, input := range []string{`{"kind":"null"}`, `{"kind":"record","fields":{"text":{"type":{"kind":"string"},"required":true}}}`,
		`{"kind":"record","fields":{"task":{"type":{"kind":"string"},"required":true},"n":{"type":{"kind":"integer"},"required":true}}}`} {
		other := *g
		var err error
		if other.InitialInput, err = graph.DecodePayloadType([]byte(input)); err != nil {
			t.Fatal(err)
		}
		if _, err := templates.TaskInput(&other, "do it"); !errors.Is(err, templates.ErrTaskGraph) {
			t.Errorf("initialInput %s: %v", input, err)
		}
	}
}

// TestClosingNamesTheIssue: a delivering software-change's input carries
// the issue its pull request closes, and its delivery reads it with the
// task as the pull request's title; a graph without the field is
// ErrNoCloses.
func TestClosingNamesTheIssue(t *testing.T) {
	tpl, _ := templates.Lookup(templates.SoftwareChange)
	g, _ := tpl.Graph(templates.DeliveryShip)
	raw, _ := templates.TaskInput(g, "# Fix it")
	raw, err := templates.Closing(g, raw, "acme/other#7")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.InitialInput.Validate(raw); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	var in map[string]string
	if err := json.Unmarshal(raw, &in); err != nil || in["closes"] != "acme/other#7" || in["task"] != "# Fix it" {
		t.Fatalf("input %s: %v", raw, err)
	}
	data, _ := tpl.JSON(templates.DeliveryShip)
	if !strings.Contains(string(data), `"target":["closes"],"value":{"source":"state","path":["closes"]}`) ||
		!strings.Contains(string(data), `"target":["title"],"value":{"source":"state","path":["task"]}`) {
		t.Fatalf("the delivery does not read the task and the issue:\n%s", data)
	}
	one, _ := templates.Lookup(templates.SingleWorker)
	g, _ = one.Graph(templates.DeliveryNone)
	raw, _ = templates.TaskInput(g, "x")
	if _, err := templates.Closing(g, raw, "#7"); !errors.Is(err, templates.ErrNoCloses) {
		t.Fatalf("single-worker: %v", err)
	}
}
