package reduce

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/oecp/oecp/graph"
)

func mustGraph(t testing.TB, src string) *graph.GraphSpec {
	t.Helper()
	g, err := graph.Decode([]byte(src))
	if err != nil {
		t.Fatalf("decode graph: %v", err)
	}
	return g
}

// wrap builds a full-v1 graph around a root node, with a permissive
// initial input type (the reducer never checks it).
func wrap(root string) string {
	return `{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},` +
		`"policy":{"policy":"policy.strict@1","default":"deny"},"root":` + root + `}`
}

const anyT = `{"kind":"null"}`

// step writes a step node JSON. in: input bindings JSON array, wb: write bindings.
func step(name, in, wb string, attempts int) string {
	return executable("step", name, in, wb, attempts) + `}`
}

func verifier(name, in, wb, signals string, attempts int) string {
	return executable("verifier", name, in, wb, attempts) + `,"signals":` + signals + `,"diagnostic":` + anyT + `}`
}

// executable writes the fields a step and a verifier share, without the
// closing brace; empty bindings default to [].
func executable(kind, name, in, wb string, attempts int) string {
	if in == "" {
		in = "[]"
	}
	if wb == "" {
		wb = "[]"
	}
	return `{"kind":"` + kind + `","name":"` + name + `","worker":"w.` + name + `@1","input":` + anyT +
		`,"output":` + anyT + `,"inputBindings":` + in + `,"writeBindings":` + wb +
		`,"timeoutMs":1000,"attempts":` + itoa(attempts)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func seq(name string, promoted string, children ...string) string {
	if promoted == "" {
		promoted = "[]"
	}
	return `{"kind":"seq","name":"` + name + `","state":` + anyT + `,"children":[` + strings.Join(children, ",") +
		`],"promotedStatePaths":` + promoted + `}`
}

func succeed(name, bindings string) string {
	if bindings == "" {
		bindings = "[]"
	}
	return `{"kind":"succeed","name":"` + name + `","output":` + anyT + `,"bindings":` + bindings + `}`
}

func fail(name, reason string) string {
	return `{"kind":"fail","name":"` + name + `","reason":"` + reason + `"}`
}

func choice(name, promoted, otherwise string, branches ...string) string {
	if promoted == "" {
		promoted = "[]"
	}
	if otherwise == "" {
		otherwise = "null"
	}
	return `{"kind":"choice","name":"` + name + `","state":` + anyT + `,"branches":[` + strings.Join(branches, ",") +
		`],"otherwise":` + otherwise + `,"promotedStatePaths":` + promoted + `}`
}

func branch(when, node string) string { return `{"when":` + when + `,"node":` + node + `}` }

func par(name, promoted, join string, branches ...string) string {
	if promoted == "" {
		promoted = "[]"
	}
	return `{"kind":"par","name":"` + name + `","state":` + anyT + `,"branches":[` + strings.Join(branches, ",") +
		`],"promotedStatePaths":` + promoted + `,"join":` + join + `}`
}

func loop(name, promoted, body, until string, max int) string {
	if promoted == "" {
		promoted = "[]"
	}
	u := ""
	if until != "" {
		u = `,"until":` + until
	}
	return `{"kind":"loop","name":"` + name + `","state":` + anyT + `,"body":` + body + u +
		`,"maxIterations":` + itoa(max) + `,"promotedStatePaths":` + promoted + `}`
}

func mapNode(name, promoted, body, over string, maxItems int) string {
	if promoted == "" {
		promoted = "[]"
	}
	return `{"kind":"map","name":"` + name + `","state":` + anyT + `,"body":` + body + `,"over":` + over +
		`,"maxItems":` + itoa(maxItems) + `,"promotedStatePaths":` + promoted + `}`
}

// in guard on a control.
func inG(node, source, field string, labels ...string) string {
	f := "null"
	if field != "" {
		f = `"` + field + `"`
	}
	l, _ := json.Marshal(labels)
	return `{"kind":"in","value":{"name":"` + node + `","source":"` + source + `","field":` + f + `},"labels":` + string(l) + `}`
}

func bind(target, source, path string) string {
	return `{"target":["` + target + `"],"value":{"source":"` + source + `","path":["` + path + `"]}}`
}

func write(node, channel, path, target string) string {
	return `{"value":{"node":"` + node + `","channel":"` + channel + `","path":["` + path + `"]},"target":["` + target + `"]}`
}

func decisionsJSON(t testing.TB, ds []Decision) string {
	t.Helper()
	if ds == nil {
		ds = []Decision{}
	}
	b, err := json.Marshal(ds)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// inputOr is the initial input in, or {} when in is empty.
func inputOr(in string) json.RawMessage {
	if in == "" {
		return raw(`{}`)
	}
	return raw(in)
}

func verified(out string) *Outcome { return &Outcome{Status: OutcomeVerified, Output: raw(out)} }

func verdict(out string, signals map[string]string, diag string) *Outcome {
	return &Outcome{Status: OutcomeVerifier, Output: raw(out), Signals: signals, Diagnostic: raw(diag)}
}

func failed(code string) *Outcome {
	return &Outcome{Status: OutcomeError, Code: code, Reason: "declared_failure"}
}

// ex builds a recorded execution.
func ex(id, ni, dpos uint64, node string, idx []uint64, attempt uint64, input string) Execution {
	return Execution{DispatchPosition: dpos, NodeInstance: ni, Execution: id,
		Occurrence: Occurrence{Node: node, MapIndices: idx}, Attempt: attempt, Input: raw(input), State: StateActive}
}

func (x Execution) settle(pos uint64, o *Outcome) Execution {
	x.State, x.Position, x.Outcome = StateSettled, pos, o
	return x
}

func (x Execution) void(pos uint64, r VoidReason) Execution {
	x.State, x.Position, x.VoidReason = StateVoided, pos, r
	return x
}

// echo is a deterministic fake worker: steps return {"echo": input},
// verifiers accept with every declared signal set to its first label.
func echoWorker(g *graph.GraphSpec) Worker {
	return func(d Dispatch) Outcome {
		n, _ := findNode(g, d.Occurrence.Node)
		if v, ok := n.(*graph.Verifier); ok {
			sig := map[string]string{}
			for f, ls := range v.Signals {
				sig[f] = ls[0]
			}
			return Outcome{Status: OutcomeVerifier, Output: d.Input, Signals: sig, Diagnostic: d.Input}
		}
		return Outcome{Status: OutcomeVerified, Output: raw(`{"echo":` + string(d.Input) + `}`)}
	}
}
