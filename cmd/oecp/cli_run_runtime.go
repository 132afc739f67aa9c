package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/nativegraph"
)

// harnessDefault is what --harness NAME puts in a runtime plan besides
// the models: the provider, the environment variable that holds its key
// (declared by every agent node; the server's harness file must allow it)
// and the model of a node --model does not name.
type harnessDefault struct{ provider, env, model string }

// harnessDefaults are the harnesses --harness takes.
var harnessDefaults = map[string]harnessDefault{
	"codex":  {"openai", "OPENAI_API_KEY", "gpt-5.6"},
	"claude": {"anthropic", "ANTHROPIC_API_KEY", "claude-sonnet-5"},
}

// Roles --model ROLE=M names: every agent step (a writer), every agent
// verifier.
const (
	roleWorker   = "worker"
	roleVerifier = "verifier"
)

// runSizes are the run sizes a runtime plan takes.
var runSizes = []string{"tiny", "small", "standard", "large"}

// runtimePlan is a RuntimePlan as run/submit takes it.
type runtimePlan struct {
	Harness  string                 `json:"harness"`
	Provider string                 `json:"provider"`
	Size     string                 `json:"size"`
	Nodes    map[string]nodeBinding `json:"nodes"`
}

type nodeBinding struct {
	Kind         string   `json:"kind"`
	Model        string   `json:"model,omitempty"`
	SessionScope string   `json:"sessionScope,omitempty"`
	Env          []string `json:"env,omitempty"`
}

// buildRuntime is the runtime plan of g on harness: git delivery nodes
// are bound as git_delivery (their credentials are the host's), every
// other executable as an agent with its model (models: "M" for every
// node, "ROLE=M" or "NODE=M" for some; a node's own wins over its role's,
// which wins over the default), the env names (nil: the harness's key
// variable) and, inside a loop, one session kept across its rounds.
func buildRuntime(g *graph.GraphSpec, harness string, models []string, size string, env []string) (json.RawMessage, error) {
	def, ok := harnessDefaults[harness]
	if !ok {
		return nil, fmt.Errorf("--harness %q: want codex or claude", harness)
	}
	if !slices.Contains(runSizes, size) {
		return nil, fmt.Errorf("--size %q: want %s", size, strings.Join(runSizes, ", "))
	}
	if env == nil {
		env = []string{def.env}
	}
	execs := nativegraph.Executables(g)
	agents := map[string]string{} // agent node -> role
	for name, n := range execs {
		if !nativegraph.IsDelivery(n) {
			agents[name] = roleWorker
			if n.NodeKind() == graph.KindVerifier {
				agents[name] = roleVerifier
			}
		}
	}
	chosen, err := chooseModels(models, def.model, agents)
	if err != nil {
		return nil, err
	}
	looped := inLoops(g)
	plan := runtimePlan{Harness: harness, Provider: def.provider, Size: size, Nodes: map[string]nodeBinding{}}
	for name := range execs {
		if _, agent := agents[name]; !agent {
			plan.Nodes[name] = nodeBinding{Kind: "git_delivery"}
			continue
		}
		b := nodeBinding{Kind: "agent", Model: chosen[name], Env: env}
		if looped[name] {
			b.SessionScope = "node_instance"
		}
		plan.Nodes[name] = b
	}
	return json.Marshal(plan)
}

// chooseModels gives every agent node (by name, with its role) its model
// from the --model values.
func chooseModels(values []string, def string, agents map[string]string) (map[string]string, error) {
	byKey := map[string]string{}
	for _, v := range values {
		key, model, keyed := strings.Cut(v, "=")
		if !keyed {
			key, model = "", v
		}
		if model == "" {
			return nil, fmt.Errorf("--model %q: want MODEL, ROLE=MODEL or NODE=MODEL", v)
		}
		if _, node := agents[key]; keyed && key != roleWorker && key != roleVerifier && !node {
			return nil, fmt.Errorf("--model %q: %q is neither a role (%s, %s) nor an agent node of the graph (%s)",
				v, key, roleWorker, roleVerifier, strings.Join(slices.Sorted(maps.Keys(agents)), ", "))
		}
		byKey[key] = model
	}
	out := map[string]string{}
	for name, role := range agents {
		out[name] = cmp.Or(byKey[name], byKey[role], byKey[""], def)
	}
	return out, nil
}

// inLoops is the set of g's executables that sit inside a loop (and so
// may run once per round).
func inLoops(g *graph.GraphSpec) map[string]bool {
	out := map[string]bool{}
	var visit func(n graph.Node, looped bool)
	visit = func(n graph.Node, looped bool) {
		if k := n.NodeKind(); looped && (k == graph.KindStep || k == graph.KindVerifier) {
			out[n.NodeName()] = true
		}
		_, isLoop := n.(*graph.Loop)
		for _, c := range graph.Children(n) {
			visit(c, looped || isLoop)
		}
	}
	visit(g.Root, false)
	return out
}
