package capsule_test

import (
	"io"
	"log/slog"
	"slices"
)

// A small builder for test graphs: GraphSpec trees as JSON-able maps.

type M = map[string]any

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var (
	tNull = M{"kind": "null"}
	tStr  = M{"kind": "string"}
	tInt  = M{"kind": "integer"}
)

type field struct {
	name     string
	typ      any
	required bool
}

func req(name string, typ any) field { return field{name, typ, true} }
func opt(name string, typ any) field { return field{name, typ, false} }

func tRec(fs ...field) M {
	m := M{}
	for _, f := range fs {
		m[f.name] = M{"required": f.required, "type": f.typ}
	}
	return M{"kind": "record", "fields": m}
}

func tArr(items any) M { return M{"kind": "array", "items": items} }

var (
	tText  = tRec(req("text", tStr))
	tSleep = tRec(req("ms", tInt))
	// stState is the state of most test graphs.
	stState = tRec(req("text", tStr), opt("ms", tInt), opt("items", tArr(tText)), opt("results", tArr(tStr)))
)

func sel(source string, path ...string) M { return M{"source": source, "path": path} }

func ib(target string, value M) M { return M{"target": []string{target}, "value": value} }

// fromState binds input field f to state field f.
func fromState(f string) M { return ib(f, sel("state", f)) }

func wOut(node, path, target string) M {
	return M{"value": M{"node": node, "channel": "out", "path": []string{path}}, "target": []string{target}}
}

func ctl(name, source string, field any) M { return M{"name": name, "source": source, "field": field} }

func gIn(c M, labels ...string) M { return M{"kind": "in", "value": c, "labels": labels} }

var errorCodes = []string{"timeout", "crash", "malformed", "refusal"}

func onError(node string, codes ...string) M {
	if len(codes) == 0 {
		codes = errorCodes
	}
	return gIn(ctl(node, "error", nil), codes...)
}

type opts func(M)

func attempts(n int) opts { return func(m M) { m["attempts"] = n } }
func timeout(ms int) opts { return func(m M) { m["timeoutMs"] = ms } }
func binds(b ...M) opts   { return func(m M) { m["inputBindings"] = b } }
func writes(w ...M) opts  { return func(m M) { m["writeBindings"] = w } }
func input(t any) opts    { return func(m M) { m["input"] = t } }
func output(t any) opts   { return func(m M) { m["output"] = t } }
func promote(p ...string) opts {
	return func(m M) {
		ps := [][]string{}
		for _, x := range p {
			ps = append(ps, []string{x})
		}
		m["promotedStatePaths"] = ps
	}
}

func with(m M, os []opts) M {
	for _, o := range os {
		o(m)
	}
	return m
}

// step is a {text} → {text} step reading state.text, unless opts say otherwise.
func step(name, worker string, os ...opts) M {
	return with(M{"kind": "step", "name": name, "worker": worker, "input": tText, "output": tText,
		"inputBindings": []M{fromState("text")}, "writeBindings": []M{}, "timeoutMs": 30000, "attempts": 1}, os)
}

// sleepStep sleeps state.ms milliseconds.
func sleepStep(name string, os ...opts) M {
	return step(name, "builtin.sleep@1", append([]opts{input(tSleep), output(tNull), binds(fromState("ms"))}, os...)...)
}

// verifier is a {text} verifier with signals {verdict: [approved, rejected]}.
func verif(name, worker string, os ...opts) M {
	return with(M{"kind": "verifier", "name": name, "worker": worker, "input": tText, "output": tNull,
		"inputBindings": []M{fromState("text")}, "writeBindings": []M{}, "timeoutMs": 30000, "attempts": 1,
		"signals": M{"verdict": []string{"approved", "rejected"}}, "diagnostic": tNull}, os)
}

func group(kind, name string, m M, os []opts) M {
	m["kind"], m["name"], m["state"], m["promotedStatePaths"] = kind, name, stState, [][]string{}
	return with(m, os)
}

func seq(name string, children ...M) M { return group("seq", name, M{"children": children}, nil) }

func seqP(name string, os []opts, children ...M) M {
	return group("seq", name, M{"children": children}, os)
}

func par(name string, join M, branches ...M) M {
	return group("par", name, M{"branches": branches, "join": join}, nil)
}

func loop(name string, body M, until M, max int, os ...opts) M {
	m := M{"body": body, "maxIterations": max}
	if until != nil {
		m["until"] = until
	}
	return group("loop", name, m, os)
}

func mapOver(name string, body M, over M, max int, os ...opts) M {
	return group("map", name, M{"body": body, "over": over, "maxItems": max}, os)
}

type branch struct {
	when M
	node M
}

func when(g M, n M) branch { return branch{g, n} }

func choice(name string, otherwise M, bs ...branch) M {
	var out []M
	for _, b := range bs {
		out = append(out, M{"when": b.when, "node": b.node})
	}
	m := M{"branches": out}
	if otherwise != nil {
		m["otherwise"] = otherwise
	}
	return group("choice", name, m, nil)
}

// succeedText ends with output {text: state.text}.
func succeedText(name string) M {
	return M{"kind": "succeed", "name": name, "output": tText, "bindings": []M{fromState("text")}}
}

func failWith(name, reason string) M { return M{"kind": "fail", "name": name, "reason": reason} }

// spec wraps root; the initial input is {text} plus the optional state
// fields named in need, required.
func spec(root M, need ...string) M {
	fs := []field{req("text", tStr)}
	types := map[string]any{"ms": tInt, "items": tArr(tText), "results": tArr(tStr)}
	for _, f := range []string{"ms", "items", "results"} {
		fs = append(fs, field{f, types[f], slices.Contains(need, f)})
	}
	st := tRec(fs...)
	setState(root, st)
	return M{"profile": "openengine.graph.full/v1", "initialInput": st,
		"policy": M{"policy": "policy.default@1", "default": "deny"}, "root": root}
}

// setState declares st as the state of every group under n (the
// verifier checks reads against the declared group state).
func setState(n any, st M) {
	switch x := n.(type) {
	case M:
		if _, ok := x["state"]; ok {
			x["state"] = st
		}
		for _, v := range x {
			setState(v, st)
		}
	case []M:
		for _, v := range x {
			setState(v, st)
		}
	}
}
