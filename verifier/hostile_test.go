package verifier_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/verifier"
)

// Hostile graphs: small or mid-sized decodable graphs whose flow analysis
// used to take seconds (map10x2: a 5 KB graph, 2.2 s; guardLoop: 24 s;
// loops: 50 s). The analysis work meter bounds them; these tests pin the
// verdicts, BenchmarkVerifyHostile times them, and FuzzVerify seeds them.

func writerStep(name string, paths int, prefix string) obj {
	s := step(name)
	var wbs []any
	for i := 0; i < paths; i++ {
		wbs = append(wbs, obj{"target": []any{fmt.Sprintf("%s%d", prefix, i)}, "value": obj{"node": name, "channel": "out", "path": []any{"x"}}})
	}
	s["writeBindings"] = wbs
	return s
}

func succeedN(n string) obj {
	return obj{"kind": "succeed", "name": n, "output": tNull, "bindings": []any{}}
}

// approvals returns k binary verifiers v0..v(k-1) and, for each, the guard
// that it approved.
func approvals(k int) (nodes, guards []any) {
	for i := 0; i < k; i++ {
		v := fmt.Sprintf("v%d", i)
		nodes = append(nodes, verifierNode(v, 1))
		guards = append(guards, in(sel(v, "signal", "verdict"), "approved"))
	}
	return nodes, guards
}

// allChoice is a choice that succeeds as "yes" when every guard of gs holds
// and as "no" otherwise.
func allChoice(gs []any) obj {
	return obj{"kind": "choice", "name": "c", "state": tS, "promotedStatePaths": []any{},
		"branches":  []any{obj{"when": obj{"kind": "all", "guards": gs}, "node": succeedN("yes")}},
		"otherwise": succeedN("no")}
}

// advWide: a step writing many paths, then k binary verifiers all read by a final guard.
func hostileWide(k, paths int) obj {
	vs, gs := approvals(k)
	children := append([]any{writerStep("w", paths, "p")}, vs...)
	return seq("root", append(children, allChoice(gs))...)
}

// advLoopCtl: many loops (each sets a relevant |g control) then verifiers.
func hostileLoops(loops, k int) obj {
	var children []any
	var gs []any
	for i := 0; i < loops; i++ {
		l := fmt.Sprintf("l%d", i)
		children = append(children, obj{"kind": "loop", "name": l, "state": tS, "body": step(fmt.Sprintf("ls%d", i)), "maxIterations": 1, "promotedStatePaths": []any{}})
		gs = append(gs, in(sel(l, "group", "terminated"), "exhausted"))
	}
	vs, vgs := approvals(k)
	children = append(children, vs...)
	return seq("root", append(children, allChoice(append(gs, vgs...)))...)
}

// advGuardLoop: a loop (100 iterations) whose body holds k verifiers and a choice with a big guard.
func hostileGuardLoop(k, guardNodes int) obj {
	var body []any
	for i := 0; i < k; i++ {
		body = append(body, verifierNode(fmt.Sprintf("v%d", i), 1))
	}
	var g obj = in(sel("v0", "signal", "verdict"), "approved")
	for n := 1; n+2 < guardNodes; n += 2 {
		g = obj{"kind": "not", "guard": obj{"kind": "not", "guard": g}}
	}
	var all []any
	all = append(all, g)
	for i := 1; i < k; i++ {
		all = append(all, in(sel(fmt.Sprintf("v%d", i), "signal", "verdict"), "approved"))
	}
	body = append(body, obj{"kind": "choice", "name": "c", "state": tS, "promotedStatePaths": []any{},
		"branches":  []any{obj{"when": obj{"kind": "all", "guards": all}, "node": step("yes")}},
		"otherwise": step("no")})
	return seq("root", obj{"kind": "loop", "name": "L", "state": tS, "body": seq("b", body...), "maxIterations": 100, "promotedStatePaths": []any{},
		"until": in(sel("v0", "signal", "verdict"), "rejected")}, succeedN("done"))
}

// advMap: incoming worlds x a map whose body verifier has a many-label signal read by k_of_map with a big count.
func hostileMap(k, labels, count int) obj {
	children, gs := approvals(k)
	body := verifierNode("mv", 1)
	var ls []any
	for i := 0; i < labels; i++ {
		ls = append(ls, fmt.Sprintf("l%d", i))
	}
	body["signals"] = obj{"verdict": ls}
	children = append(children, obj{"kind": "map", "name": "m", "state": tS, "body": body,
		"over": obj{"source": "state", "path": []any{"items"}}, "maxItems": 1024, "promotedStatePaths": []any{}})
	gs = append(gs, obj{"kind": "k_of_map", "count": count, "value": sel("mv", "signal", "verdict"), "labels": []any{"l0"}})
	return seq("root", append(children, allChoice(gs))...)
}

type hostileCase struct {
	name string
	root obj
	code graph.DiagnosticCode // a diagnostic the verdict must contain
}

func hostileCases() []hostileCase {
	return []hostileCase{
		{"map10x2", hostileMap(10, 3, 255), graph.CodeCeilingExceeded},
		{"guardLoop", hostileGuardLoop(10, 4000), graph.CodeCeilingExceeded},
		{"loops1000x9", hostileLoops(1000, 9), graph.CodeCeilingExceeded},
		{"wide10x4000", hostileWide(10, 4000), graph.CodeSchemaSafety},
		{"map1x1024", hostileMap(1, 2, 1024), graph.CodeCeilingExceeded},
	}
}

func hostileJSON(tb testing.TB, root obj) []byte {
	doc := obj{"profile": graph.ProfileFull, "initialInput": tS, "policy": obj{"policy": "policy.default@1", "default": "deny"}, "root": root}
	data, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func TestHostileGraphsVerdicts(t *testing.T) {
	v := verifier.New(verifier.BuiltinRegistry{})
	for _, c := range hostileCases() {
		g, err := graph.Decode(hostileJSON(t, c.root))
		if err != nil {
			t.Fatalf("%s: decode: %v", c.name, err)
		}
		r1, r2 := v.Verify(g), v.Verify(g)
		b1, _ := json.Marshal(r1)
		b2, _ := json.Marshal(r2)
		if string(b1) != string(b2) {
			t.Fatalf("%s: non-deterministic verdict", c.name)
		}
		found := false
		for _, d := range r1.Diagnostics {
			found = found || d.Code == c.code
		}
		if r1.OK() || !found {
			t.Fatalf("%s: want rejected with %s, got %.400s", c.name, c.code, b1)
		}
	}
}

func BenchmarkVerifyHostile(b *testing.B) {
	v := verifier.New(verifier.BuiltinRegistry{})
	for _, c := range hostileCases() {
		g, err := graph.Decode(hostileJSON(b, c.root))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				v.Verify(g)
			}
		})
	}
}
