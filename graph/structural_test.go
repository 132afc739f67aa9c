package graph_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/oecp/oecp/graph"
)

func step(name string, attempts int) string {
	return fmt.Sprintf(`{"kind":"step","name":%q,"worker":"w@1","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":1,"attempts":%d}`, name, attempts)
}

func full(root string) string {
	return `{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":{"policy":"p@1","default":"deny"},"root":` + root + `}`
}

func loop(name, body string, max int) string {
	return fmt.Sprintf(`{"kind":"loop","name":%q,"state":{"kind":"null"},"body":%s,"maxIterations":%d,"promotedStatePaths":[]}`, name, body, max)
}

func mapNode(name, body string, max int) string {
	return fmt.Sprintf(`{"kind":"map","name":%q,"state":{"kind":"null"},"body":%s,"over":{"source":"state","path":["items"]},"maxItems":%d,"promotedStatePaths":[]}`, name, body, max)
}

func seq(name string, children ...string) string {
	return fmt.Sprintf(`{"kind":"seq","name":%q,"state":{"kind":"null"},"children":[%s],"promotedStatePaths":[]}`, name, strings.Join(children, ","))
}

func par(name, join string, branches ...string) string {
	return fmt.Sprintf(`{"kind":"par","name":%q,"state":{"kind":"null"},"branches":[%s],"promotedStatePaths":[],"join":%s}`, name, strings.Join(branches, ","), join)
}

func TestStructuralBounds(t *testing.T) {
	cases := []struct {
		name, root, bounds string
	}{
		{"nested loops and map",
			seq("root", loop("outer", seq("body", step("a", 2), loop("inner", step("b", 3), 4)), 5), mapNode("each", par("p", `{"kind":"all"}`, step("c", 1), step("d", 1)), 3)),
			`{"termination":{"kind":"bounded","ranking":[["outer"],["inner"]],"maxIterations":25},"maxNodeExecutions":31,"peakConcurrency":6,"attemptsPerNode":{"a":2,"b":3,"c":1,"d":1}}`},
		{"terminals only",
			seq("root", `{"kind":"succeed","name":"s","output":{"kind":"null"},"bindings":[]}`),
			`{"termination":{"kind":"acyclic","order":["root","s"]},"maxNodeExecutions":1,"peakConcurrency":1,"attemptsPerNode":{}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := graph.Structural(mustDecode(t, full(tc.root)))
			if !r.OK {
				t.Fatalf("diagnostics: %+v", r.Diagnostics)
			}
			b, _ := json.Marshal(r.Bounds)
			if string(b) != tc.bounds {
				t.Fatalf("bounds\n got %s\nwant %s", b, tc.bounds)
			}
		})
	}
}

func TestStructuralDiagnostics(t *testing.T) {
	deep := step("leaf", 1)
	for i := 0; i < graph.MaxGraphDepth; i++ {
		deep = seq(fmt.Sprintf("s%d", i), deep)
	}
	wide := make([]string, 0, 2100)
	for i := 0; i < 2100; i++ {
		wide = append(wide, step(fmt.Sprintf("n%d", i), 1))
	}
	cases := []struct {
		name, doc string
		code      graph.DiagnosticCode
		message   string
	}{
		{"single-worker needs a step root", strings.Replace(full(seq("root", step("a", 1))), graph.ProfileFull, graph.ProfileSingleWorker, 1),
			graph.CodeInvalidGraphShape, "profile openengine.graph.single-worker/v1 requires a single step root, got seq"},
		{"duplicate name", full(seq("root", step("a", 1), step("a", 1))), graph.CodeInvalidGraphShape, "duplicate node name a"},
		{"attempts ceiling", full(step("a", 101)), graph.CodeCeilingExceeded, "attempts 101 exceeds the ceiling of 100"},
		{"loop ceiling", full(loop("l", step("a", 1), 101)), graph.CodeCeilingExceeded, "loop maxIterations 101 exceeds the ceiling of 100"},
		{"map ceiling", full(mapNode("m", step("a", 1), 1025)), graph.CodeCeilingExceeded, "map maxItems 1025 exceeds the ceiling of 1024"},
		{"depth ceiling", full(deep), graph.CodeCeilingExceeded, "graph depth exceeds the ceiling of 64"},
		{"node ceiling", full(seq("root", seq("x", wide...), seq("y", wide...))), graph.CodeCeilingExceeded, ""},
		{"peak concurrency", full(mapNode("m", par("p", `{"kind":"all"}`, step("a", 1), step("b", 1)), 1000)), graph.CodeCeilingExceeded, "peakConcurrency 2000 exceeds the ceiling of 1024"},
		{"executions", full(mapNode("m", loop("l", step("a", 1), 100), 1000)), graph.CodeCeilingExceeded, "maxNodeExecutions 100000 exceeds the ceiling of 65536"},
		{"quorum shape", full(par("p", `{"kind":"quorum","count":3}`, step("a", 1), step("b", 1))), graph.CodeInvalidGraphShape, "quorum count 3 exceeds the 2 parallel branches"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := graph.Structural(mustDecode(t, tc.doc))
			if r.OK || r.Bounds != nil {
				t.Fatal("graph accepted")
			}
			found := false
			for _, d := range r.Diagnostics {
				if d.Code == tc.code && (tc.message == "" || d.Message == tc.message) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no %s %q in %+v", tc.code, tc.message, r.Diagnostics)
			}
			if _, err := graph.Identity(mustDecode(t, tc.doc)); err == nil {
				t.Fatal("Identity of a rejected graph")
			}
		})
	}
}

func TestDiagnosticOrder(t *testing.T) {
	p := func(segs ...graph.PathSegment) graph.Path { return segs }
	ds := []graph.Diagnostic{
		{Code: graph.CodeInvalidGraphShape, Message: "b", Path: p(graph.FieldSeg("root"), graph.NodeSeg("a"))},
		{Code: graph.CodeSchemaSafety, Message: "z", Path: p(graph.FieldSeg("root"), graph.NodeSeg("a"))},
		{Code: graph.CodeSchemaSafety, Message: "a", Path: p(graph.FieldSeg("root"), graph.NodeSeg("a"))},
		{Code: graph.CodeReachability, Path: p(graph.FieldSeg("root"))},
		{Code: graph.CodeReachability, Path: p(graph.FieldSeg("root"), graph.IndexSeg(10))},
		{Code: graph.CodeReachability, Path: p(graph.FieldSeg("root"), graph.IndexSeg(2))},
		{Code: graph.CodeReachability, Path: p(graph.FieldSeg("root"), graph.FieldSeg("zz"))},
		{Code: graph.CodeReachability, Path: p(graph.FieldSeg("a b"))},
	}
	graph.SortDiagnostics(ds)
	var got []string
	for _, d := range ds {
		b, _ := json.Marshal(d.Path)
		got = append(got, string(d.Code)+":"+d.Message+":"+string(b))
	}
	want := []string{
		`reachability::[{"kind":"field","name":"root"}]`,
		`reachability::[{"kind":"field","name":"root"},{"kind":"field","name":"zz"}]`,
		`reachability::[{"kind":"field","name":"root"},{"kind":"index","index":2}]`,
		`reachability::[{"kind":"field","name":"root"},{"kind":"index","index":10}]`,
		`schema_safety:a:[{"kind":"field","name":"root"},{"kind":"node","name":"a"}]`,
		`schema_safety:z:[{"kind":"field","name":"root"},{"kind":"node","name":"a"}]`,
		`invalid_graph_shape:b:[{"kind":"field","name":"root"},{"kind":"node","name":"a"}]`,
		`reachability::[{"kind":"index","index":4294967295}]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("order:\n%s", strings.Join(got, "\n"))
	}
}
