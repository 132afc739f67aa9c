// Package nativegraph checks a graph offline against what native admission
// (run/submit) requires of the graph alone, before it looks at a runtime
// plan or the host: the full profile, one attempt per executable,
// instructions on every agent node, the delivery contract on every git
// delivery node, no writer beside another execution, and the production
// verifier over the graph-local worker registry admission builds (one
// descriptor per worker reference, its contract the node's declared types).
// `oecp plan` uses it for native graphs, which the server's v1 plan cannot
// resolve, and the templates' tests use it to prove every built-in graph
// admissible.
//
// Run admission (package runs) takes its executables, the writer-overlap
// rule and the graph-local registry from here, and checks the profile,
// attempts and instructions itself beside the runtime plan: a change to
// those rules belongs in both.
package nativegraph

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/oecp/oecp/delivery"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/verifier"
)

// AgentPrefix starts the worker reference of an agent node by convention
// (agent.<node>@1); the reference's own templates name theirs
// builtin.agent.<role>@1. A native worker reference is only a graph-local
// name: the runtime plan decides what runs the node.
const (
	AgentPrefix        = "agent."
	BuiltinAgentPrefix = "builtin.agent."
)

// ErrRule is a graph that breaks a native admission rule outside the
// verifier (the message says which).
var ErrRule = errors.New("native admission")

func rulef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRule, fmt.Sprintf(format, args...))
}

// IsNative reports whether g reads as a native graph: it has executables
// and each is an agent node (by the worker naming convention) or a git
// delivery node. Any other reference is a v1 worker a server resolves.
func IsNative(g *graph.GraphSpec) bool {
	execs := Executables(g)
	if len(execs) == 0 {
		return false
	}
	for _, n := range execs {
		w := worker(n)
		if !strings.HasPrefix(w, AgentPrefix) && !strings.HasPrefix(w, BuiltinAgentPrefix) && !IsDelivery(n) {
			return false
		}
	}
	return true
}

// IsDelivery reports whether n is bound by its worker reference to git
// delivery (a runtime plan binds it as git_delivery).
func IsDelivery(n graph.Node) bool { return delivery.Mode(worker(n)) != "" }

// Check applies the native graph rules to g, then the verifier over the
// graph-local registry. A broken rule is an error wrapping ErrRule (the
// verifier does not run); otherwise the verifier's result says whether g
// verified.
func Check(g *graph.GraphSpec) (verifier.Result, error) {
	if g.Profile != graph.ProfileFull {
		return verifier.Result{}, rulef("graph profile must be %s", graph.ProfileFull)
	}
	execs := Executables(g)
	for _, name := range sortedKeys(execs) {
		n := execs[name]
		if attempts(n) != 1 {
			return verifier.Result{}, rulef("executable %q must declare attempts 1 (native runs never retry)", name)
		}
		if IsDelivery(n) {
			if err := delivery.CheckNode(n); err != nil {
				return verifier.Result{}, rulef("node %q: %v", name, err)
			}
		} else if instructions(n) == nil {
			return verifier.Result{}, rulef("agent node %q must carry instructions", name)
		}
	}
	if err := CheckOverlap(g.Root); err != nil {
		return verifier.Result{}, err
	}
	reg, err := LocalRegistry(execs)
	if err != nil {
		return verifier.Result{}, err
	}
	return verifier.New(reg).Verify(g), nil
}

// Executables returns g's steps and verifiers by name.
func Executables(g *graph.GraphSpec) map[string]graph.Node {
	out := map[string]graph.Node{}
	graph.Walk(g, func(n graph.Node, _ graph.Path, _ int) bool {
		if k := n.NodeKind(); k == graph.KindStep || k == graph.KindVerifier {
			out[n.NodeName()] = n
		}
		return true
	})
	return out
}

// LocalRegistry is the graph-local worker registry: one builtin-bound
// descriptor per distinct worker reference, whose contract is the node's
// declared types. A reference two nodes use with different contracts is
// refused.
func LocalRegistry(execs map[string]graph.Node) (verifier.Registry, error) {
	byRef := map[string]verifier.CommandWorkerSpec{}
	for _, name := range sortedKeys(execs) {
		spec := workerSpec(execs[name])
		if prev, ok := byRef[spec.Worker]; ok {
			if !sameContract(prev, spec) {
				return nil, rulef("worker %q is used by nodes with different contracts", spec.Worker)
			}
			continue
		}
		byRef[spec.Worker] = spec
	}
	specs := make([]verifier.CommandWorkerSpec, 0, len(byRef))
	for _, ref := range sortedKeys(byRef) {
		specs = append(specs, byRef[ref])
	}
	reg, err := verifier.NewCommandRegistry(specs)
	if err != nil {
		return nil, rulef("graph-local worker registry: %v", err)
	}
	return reg, nil
}

func workerSpec(n graph.Node) verifier.CommandWorkerSpec {
	null := graph.PayloadType{Kind: graph.PayloadNull}
	switch t := n.(type) {
	case *graph.Step:
		return verifier.CommandWorkerSpec{Worker: t.Worker, Kind: verifier.KindStep, Input: t.Input, Output: t.Output, Diagnostic: null}
	case *graph.Verifier:
		return verifier.CommandWorkerSpec{Worker: t.Worker, Kind: verifier.KindVerifier, Input: t.Input, Output: t.Output,
			Signals: t.Signals, Diagnostic: t.Diagnostic}
	}
	return verifier.CommandWorkerSpec{}
}

// sameContract compares two specs by their canonical type encodings.
func sameContract(a, b verifier.CommandWorkerSpec) bool {
	enc := func(t graph.PayloadType) string {
		b, _ := t.MarshalJSON()
		return string(b)
	}
	return a.Kind == b.Kind && enc(a.Input) == enc(b.Input) && enc(a.Output) == enc(b.Output) &&
		enc(a.Diagnostic) == enc(b.Diagnostic) && maps.EqualFunc(a.Signals, b.Signals, slices.Equal)
}

// CheckOverlap enforces that a writer (every step, and git delivery, which
// commits) never runs beside another execution: no par in which a branch
// holding a step runs next to another branch holding any executable, and
// no step in a map body that may run more than one item. Verifiers are
// read-only and may overlap each other.
func CheckOverlap(n graph.Node) error {
	switch t := n.(type) {
	case *graph.Par:
		var withExec, withWriter []string
		for _, b := range t.Branches {
			w, e := contents(b)
			if e {
				withExec = append(withExec, b.NodeName())
			}
			if w != "" {
				withWriter = append(withWriter, w)
			}
		}
		if len(withWriter) > 0 && len(withExec) > 1 {
			return rulef("par %q: writer step %q may run alongside another execution", t.Name, withWriter[0])
		}
	case *graph.Map:
		if w, _ := contents(t.Body); w != "" && t.MaxItems > 1 {
			return rulef("map %q: writer step %q may run for several items at once", t.Name, w)
		}
	}
	for _, c := range graph.Children(n) {
		if err := CheckOverlap(c); err != nil {
			return err
		}
	}
	return nil
}

// contents reports the first step in n's subtree (writer) and whether the
// subtree holds any executable.
func contents(n graph.Node) (writer string, hasExec bool) {
	switch n.NodeKind() {
	case graph.KindStep:
		return n.NodeName(), true
	case graph.KindVerifier:
		return "", true
	}
	for _, c := range graph.Children(n) {
		w, e := contents(c)
		if writer == "" {
			writer = w
		}
		hasExec = hasExec || e
	}
	return writer, hasExec
}

func worker(n graph.Node) string {
	switch t := n.(type) {
	case *graph.Step:
		return t.Worker
	case *graph.Verifier:
		return t.Worker
	}
	return ""
}

func attempts(n graph.Node) uint64 {
	switch t := n.(type) {
	case *graph.Step:
		return t.Attempts
	case *graph.Verifier:
		return t.Attempts
	}
	return 0
}

func instructions(n graph.Node) *string {
	switch t := n.(type) {
	case *graph.Step:
		return t.Instructions
	case *graph.Verifier:
		return t.Instructions
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
