// Package templates holds the built-in graphs of `oecp run submit
// --template` and `oecp template show`. A template is materialised by the
// client into an ordinary GraphSpec, which the server admits like any
// other: the server learns nothing new. Each graph takes its work from the
// `task` field of the run's initial input (see TaskInput); its agent nodes
// carry our instructions, written for the real Codex and Claude Code CLIs.
//
// Every agent error (the agent cannot start, its provider refuses the
// credential or cannot be reached, it times out, or it never answers in
// the contract's shape) ends the run at once in a fail node whose reason
// names the node and the cause (implement_refused, code_crashed, ...),
// never in another round.
package templates

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/oecp/oecp/graph"
)

// Delivery is what a run does with an accepted change.
type Delivery string

// Deliveries: none (the change stays in the run's workspace), a pull
// request into the source branch (--pr), or a pull request merged once its
// checks pass (--ship).
const (
	DeliveryNone Delivery = ""
	DeliveryPR   Delivery = "pr"
	DeliveryShip Delivery = "ship"
)

// Errors of Lookup and Graph; callers branch on them.
var (
	ErrUnknown    = errors.New("no such template")
	ErrNoDelivery = errors.New("has no delivery")
)

// Template is one built-in graph.
type Template struct {
	// Name is what --template and `template show` take.
	Name string
	// Summary says in one line what the graph does.
	Summary string
	// Deliveries are the deliveries it takes besides none.
	Deliveries []Delivery
	build      func(Delivery) *graph.GraphSpec
}

// Names of the built-in templates.
const (
	SingleWorker   = "single-worker"
	SoftwareChange = "software-change"
)

// catalogue is the built-in templates in the order `template list` shows
// them.
var catalogue = []Template{
	{
		Name:    SingleWorker,
		Summary: "one agent carries out the task; no review, no delivery",
		build:   func(Delivery) *graph.GraphSpec { return singleWorker() },
	},
	{
		Name: SoftwareChange,
		Summary: "an agent implements the task; acceptance and code verifiers judge it in parallel, a repair agent " +
			"addresses their feedback (at most 10 rounds); with --pr or --ship the accepted change is delivered",
		Deliveries: []Delivery{DeliveryPR, DeliveryShip},
		build:      softwareChange,
	},
}

// List returns the built-in templates.
func List() []Template { return slices.Clone(catalogue) }

// Lookup returns the template called name, or an error wrapping
// ErrUnknown that lists the names.
func Lookup(name string) (Template, error) {
	for _, t := range catalogue {
		if t.Name == name {
			return t, nil
		}
	}
	names := make([]string, len(catalogue))
	for i, t := range catalogue {
		names[i] = t.Name
	}
	return Template{}, fmt.Errorf("%w %q (the templates are %s)", ErrUnknown, name, strings.Join(names, ", "))
}

// Graph materialises the template with delivery d. A delivery the
// template does not take is an error wrapping ErrNoDelivery.
func (t Template) Graph(d Delivery) (*graph.GraphSpec, error) {
	if d != DeliveryNone && !slices.Contains(t.Deliveries, d) {
		return nil, fmt.Errorf("%s %w, so it takes neither --pr nor --ship", t.Name, ErrNoDelivery)
	}
	return t.build(d), nil
}

// JSON materialises the template with delivery d as GraphSpec JSON, in
// the reference field order.
func (t Template) JSON(d Delivery) ([]byte, error) {
	g, err := t.Graph(d)
	if err != nil {
		return nil, err
	}
	return g.MarshalJSON()
}
