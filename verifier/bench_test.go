package verifier_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/verifier"
)

type obj = map[string]any

var (
	tNull = obj{"kind": "null"}
	tS    = obj{"kind": "record", "fields": obj{
		"v":     obj{"type": obj{"kind": "integer"}, "required": true},
		"items": obj{"type": obj{"kind": "array", "items": obj{"kind": "integer"}}, "required": true},
	}}
)

func step(name string) obj {
	return obj{"kind": "step", "name": name, "worker": "builtin.echo@1", "input": tNull, "output": tNull,
		"inputBindings": []any{}, "writeBindings": []any{}, "timeoutMs": 1000, "attempts": 1}
}

func verifierNode(name string, fields int) obj {
	sig := obj{"verdict": []any{"approved", "rejected"}}
	for i := 1; i < fields; i++ {
		sig[fmt.Sprintf("f%d", i)] = []any{"a", "b"}
	}
	return obj{"kind": "verifier", "name": name, "worker": "builtin.approve@1", "input": tNull, "output": tNull,
		"inputBindings": []any{}, "writeBindings": []any{}, "timeoutMs": 1000, "attempts": 1, "signals": sig, "diagnostic": tNull}
}

func sel(node, source string, field any) obj {
	return obj{"name": node, "source": source, "field": field}
}

func in(s obj, labels ...any) obj { return obj{"kind": "in", "value": s, "labels": labels} }

func seq(name string, children ...any) obj {
	return obj{"kind": "seq", "name": name, "state": tS, "children": children, "promotedStatePaths": []any{}}
}

var errLabels = []any{"timeout", "crash", "malformed", "refusal"}

// bigGraph builds a verified graph of exactly 4,096 nodes using every node
// kind, nesting depth 64, and 16 choices each over its own binary signal.
func bigGraph(tb testing.TB) *graph.GraphSpec {
	count := 0
	name := func(p string) string { count++; return fmt.Sprintf("%s%d", p, count) }
	var children []any
	// Depth: a chain of seqs down to depth 64.
	var chain func(d int) obj
	chain = func(d int) obj {
		if d == 64 {
			return step(name("deep"))
		}
		return seq(name("spine"), step(name("s")), chain(d+1))
	}
	children = append(children, chain(2))
	// 16 verifier+choice blocks.
	for i := 0; i < 16; i++ {
		v := name("v")
		children = append(children, verifierNode(v, 1), obj{"kind": "choice", "name": name("c"), "state": tS, "otherwise": nil, "promotedStatePaths": []any{},
			"branches": []any{
				obj{"when": in(sel(v, "signal", "verdict"), "approved"), "node": step(name("ok"))},
				obj{"when": in(sel(v, "signal", "verdict"), "rejected"), "node": step(name("no"))},
				obj{"when": in(sel(v, "error", nil), errLabels...), "node": step(name("err"))},
			}})
	}
	// par (quorum), loop with until, map with k_of_map.
	pv := name("pv")
	children = append(children, obj{"kind": "par", "name": name("par"), "state": tS, "promotedStatePaths": []any{},
		"branches": []any{step(name("pa")), step(name("pb")), step(name("pc"))}, "join": obj{"kind": "quorum", "count": 2}})
	lv := name("lv")
	loop := name("loop")
	children = append(children, obj{"kind": "loop", "name": loop, "state": tS, "body": verifierNode(lv, 1),
		"until": in(sel(lv, "signal", "verdict"), "approved"), "maxIterations": 5, "promotedStatePaths": []any{}})
	mp := name("map")
	children = append(children, obj{"kind": "map", "name": mp, "state": tS, "body": verifierNode(pv, 1),
		"over": obj{"source": "state", "path": []any{"items"}}, "maxItems": 4, "promotedStatePaths": []any{}})
	children = append(children, obj{"kind": "choice", "name": name("after"), "state": tS, "promotedStatePaths": []any{},
		"branches": []any{obj{"when": obj{"kind": "all", "guards": []any{
			in(sel(loop, "group", "terminated"), "converged"),
			obj{"kind": "k_of_map", "count": 2, "value": sel(pv, "signal", "verdict"), "labels": []any{"approved"}},
		}}, "node": step(name("good"))}},
		"otherwise": step(name("bad"))})
	// Fill up to 4,096 nodes with seqs of steps, then the terminal.
	for count < graph.MaxGraphNodes-2 {
		var steps []any
		s := name("fill")
		for j := 0; j < 30 && count < graph.MaxGraphNodes-2; j++ {
			steps = append(steps, step(name("w")))
		}
		children = append(children, seq(s, steps...))
	}
	children = append(children, obj{"kind": "succeed", "name": name("done"), "output": tNull, "bindings": []any{}})
	root := seq("root", children...)
	count++
	return decodeObj(tb, root, count)
}

func decodeObj(tb testing.TB, root obj, count int) *graph.GraphSpec {
	doc := obj{"profile": graph.ProfileFull, "initialInput": tS,
		"policy": obj{"policy": "policy.default@1", "default": "deny"}, "root": root}
	data, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := graph.Decode(data)
	if err != nil {
		tb.Fatalf("decode (%d nodes): %v", count, err)
	}
	return g
}

// guardedChoice is one choice whose single guard is a ~4,000-node
// all/any/not tree over the 12 binary signal fields of one verifier.
func guardedChoice(tb testing.TB) *graph.GraphSpec {
	const fields = 12
	var build func(depth, i int) obj
	n := 0
	build = func(depth, i int) obj {
		n++
		if depth == 0 || n > 3900 {
			f := i % fields
			if f == 0 {
				return in(sel("v", "signal", "verdict"), "approved")
			}
			return in(sel("v", "signal", fmt.Sprintf("f%d", f)), "a")
		}
		switch depth % 3 {
		case 0:
			return obj{"kind": "not", "guard": build(depth-1, i)}
		case 1:
			return obj{"kind": "all", "guards": []any{build(depth-1, 2*i), build(depth-1, 2*i+1)}}
		}
		return obj{"kind": "any", "guards": []any{build(depth-1, 2*i), build(depth-1, 2*i+1)}}
	}
	guard := build(17, 1)
	root := seq("root", verifierNode("v", fields),
		obj{"kind": "choice", "name": "c", "state": tS, "promotedStatePaths": []any{},
			"branches":  []any{obj{"when": guard, "node": obj{"kind": "succeed", "name": "yes", "output": tNull, "bindings": []any{}}}},
			"otherwise": obj{"kind": "fail", "name": "no", "reason": "rejected"}})
	return decodeObj(tb, root, 5)
}

func TestBenchmarkGraphsVerify(t *testing.T) {
	v := verifier.New(verifier.BuiltinRegistry{})
	for name, g := range map[string]*graph.GraphSpec{"big": bigGraph(t), "guarded": guardedChoice(t)} {
		res := v.Verify(g)
		if !res.OK() {
			b, _ := json.Marshal(res.Diagnostics)
			t.Fatalf("%s: %s", name, b)
		}
	}
	nodes := 0
	graph.Walk(bigGraph(t), func(graph.Node, graph.Path, int) bool { nodes++; return true })
	if nodes != graph.MaxGraphNodes {
		t.Fatalf("big graph has %d nodes", nodes)
	}
}

func BenchmarkVerify4096Nodes(b *testing.B) {
	g := bigGraph(b)
	v := verifier.New(verifier.BuiltinRegistry{})
	b.ResetTimer()
	for b.Loop() {
		if !v.Verify(g).OK() {
			b.Fatal("not verified")
		}
	}
}

func BenchmarkVerifyGuardedChoice(b *testing.B) {
	g := guardedChoice(b)
	v := verifier.New(verifier.BuiltinRegistry{})
	b.ResetTimer()
	for b.Loop() {
		v.Verify(g)
	}
}

// BenchmarkStructural4096Nodes is the baseline of BenchmarkVerify4096Nodes
// in the same run: the structural verifier (decode-time shapes, ceilings,
// termination witness and bounds folds, no flow analysis) on the same
// graph.
func BenchmarkStructural4096Nodes(b *testing.B) {
	g := bigGraph(b)
	b.ResetTimer()
	for b.Loop() {
		if !graph.Structural(g).OK {
			b.Fatal("not structurally sound")
		}
	}
}
