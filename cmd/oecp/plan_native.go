package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/nativegraph"
)

// nativeGraph reports whether data decodes as a native graph (every
// executable an agent or git delivery node), and returns it decoded.
func nativeGraph(data []byte) (*graph.GraphSpec, bool) {
	g, err := graph.Decode(data)
	if err != nil {
		return nil, false
	}
	return g, nativegraph.IsNative(g)
}

// nativePlan is plan's JSON answer for a native graph: the server's plan
// result, plus the native rule a graph broke ("" when none).
type nativePlan struct {
	OK          bool               `json:"ok"`
	Diagnostics []graph.Diagnostic `json:"diagnostics"`
	Bounds      *graph.Bounds      `json:"bounds,omitempty"`
	Reason      string             `json:"reason,omitempty"`
}

// planNative is plan for a native graph. The server's plan verifies
// against its v1 worker registry, where no agent node resolves, so the
// client checks the graph as run/submit's admission does, offline: the
// native graph rules, then the verifier over the graph-local registry.
// The runtime plan, the model catalogue and the server's harnesses are
// checked only at submit.
func (c *cli) planNative(g *graph.GraphSpec) error {
	res, err := nativegraph.Check(g)
	if err != nil && !errors.Is(err, nativegraph.ErrRule) {
		return c.failf(exitError, "%v", err)
	}
	p := nativePlan{OK: err == nil && res.OK(), Diagnostics: res.Diagnostics, Bounds: res.Bounds}
	if p.Diagnostics == nil {
		p.Diagnostics = []graph.Diagnostic{}
	}
	if err != nil {
		p.Reason = err.Error()
	}
	if c.machine() {
		raw, merr := json.Marshal(p)
		if merr != nil {
			return c.failf(exitError, "%v", merr)
		}
		c.printRaw(raw)
		if !p.OK {
			return exitWith(exitError)
		}
		return nil
	}
	w := c.stdout
	if p.OK {
		fmt.Fprintln(w, "graph is valid (a native graph, checked here as run/submit admits it; the runtime plan is checked at submit)")
	} else {
		fmt.Fprintln(w, "graph is invalid (a native graph, checked here as run/submit admits it)")
	}
	if p.Reason != "" {
		fmt.Fprintf(w, "  %s\n", p.Reason)
	}
	for _, d := range p.Diagnostics {
		raw, _ := json.Marshal(d)
		fmt.Fprintf(w, "  %s\n", formatDiagnostic(raw))
	}
	if p.Bounds != nil {
		raw, _ := json.Marshal(p.Bounds)
		printBounds(w, raw)
	}
	if !p.OK {
		return c.failf(exitError, "the graph was rejected; fix the diagnostics above and plan again.")
	}
	return nil
}
