package nativegraph_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/nativegraph"
)

// decode reads a graph file of the repository.
func decode(t *testing.T, path string) *graph.GraphSpec {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

const (
	agentsExample = "../examples/agents/review-loop.json"
	nativeExample = "../examples/native/review-loop.json"
	v1Example     = "../examples/repair-loop.json"
)

// TestNativeExamplesVerify: the native examples, agents and git delivery
// included, are native graphs that verify over the graph-local registry;
// a v1 example on the built-in workers is not read as native.
func TestNativeExamplesVerify(t *testing.T) {
	for _, path := range []string{agentsExample, nativeExample} {
		g := decode(t, path)
		if !nativegraph.IsNative(g) {
			t.Errorf("%s is not read as native", path)
		}
		res, err := nativegraph.Check(g)
		if err != nil || !res.OK() {
			t.Errorf("%s: %v %+v", path, err, res.Diagnostics)
		}
	}
	if nativegraph.IsNative(decode(t, v1Example)) {
		t.Errorf("%s is read as native", v1Example)
	}
}

// step is the agents example's writer step.
func step(g *graph.GraphSpec) *graph.Step {
	var st *graph.Step
	graph.Walk(g, func(n graph.Node, _ graph.Path, _ int) bool {
		if s, ok := n.(*graph.Step); ok && st == nil {
			st = s
		}
		return true
	})
	return st
}

// TestNativeRulesRefuse: each graph-only rule of native admission refuses
// a graph that breaks it, before the verifier runs.
func TestNativeRulesRefuse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(g *graph.GraphSpec)
		contains string
	}{
		{"profile", func(g *graph.GraphSpec) { g.Profile = graph.ProfileSingleWorker }, "graph profile must be"},
		{"attempts", func(g *graph.GraphSpec) { step(g).Attempts = 2 }, `executable "write" must declare attempts 1`},
		{"instructions", func(g *graph.GraphSpec) { step(g).Instructions = nil }, `agent node "write" must carry instructions`},
		{"delivery contract", func(g *graph.GraphSpec) {
			graph.Walk(g, func(n graph.Node, _ graph.Path, _ int) bool {
				if v, ok := n.(*graph.Verifier); ok && v.Name == "deliver" {
					v.Worker = "builtin.git-delivery.merge@1"
				}
				return true
			})
		}, `node "deliver"`},
		{"writer beside a verifier", func(g *graph.GraphSpec) {
			round := g.Root.(*graph.Seq).Children[0].(*graph.Loop).Body.(*graph.Seq)
			round.Children = []graph.Node{&graph.Par{Name: "both", State: round.State, Branches: round.Children,
				Join: graph.Join{Kind: graph.JoinAll}, PromotedStatePaths: round.PromotedStatePaths}}
		}, `par "both": writer step "write" may run alongside another execution`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := decode(t, agentsExample)
			tc.edit(g)
			_, err := nativegraph.Check(g)
			if !errors.Is(err, nativegraph.ErrRule) || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("err %v, want ErrRule with %q", err, tc.contains)
			}
		})
	}
}

// TestNativeGraphVerifierDiagnostics: a graph that keeps the rules but
// does not verify gets the verifier's diagnostics, not a rule error.
func TestNativeGraphVerifierDiagnostics(t *testing.T) {
	g := decode(t, agentsExample)
	step(g).WriteBindings[0].Target = graph.FieldPath{"nowhere"}
	res, err := nativegraph.Check(g)
	if err != nil || res.OK() || len(res.Diagnostics) == 0 {
		t.Fatalf("err %v, result %+v", err, res)
	}
}
