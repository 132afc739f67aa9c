package reduce

import (
	"errors"
	"strings"
	"testing"

	"github.com/oecp/oecp/graph"
)

func outcomeJSON(t *testing.T, term *Terminal) string {
	t.Helper()
	if term == nil {
		return "<nil>"
	}
	b, err := term.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// scripted is a worker whose outcome depends on the node and its per-node
// call count; the default is echo.
func scripted(g *graph.GraphSpec, script map[string][]*Outcome) Worker {
	calls := map[string]int{}
	echo := echoWorker(g)
	return func(d Dispatch) Outcome {
		n := d.Occurrence.Node
		i := calls[n]
		calls[n]++
		if s := script[n]; i < len(s) && s[i] != nil {
			return *s[i]
		}
		return echo(d)
	}
}

func TestSimulatedRuns(t *testing.T) {
	accepted := verdict(`null`, map[string]string{"v": "ok"}, `null`)
	rejected := verdict(`null`, map[string]string{"v": "no"}, `null`)
	errAll := []string{"timeout", "crash", "malformed", "refusal"}
	cases := []struct {
		name     string
		graph    string
		input    string
		script   map[string][]*Outcome
		want     string // terminal JSON
		wantErr  error
		attempts map[string][]uint64 // node -> attempts in dispatch order
	}{
		{
			name:  "succeed output from bindings",
			graph: wrap(seq("root", "", step("a", `[`+bind("x", "state", "x")+`]`, `[`+write("a", "out", "echo", "y")+`]`, 1), succeed("done", `[`+bind("y", "state", "y")+`]`))),
			input: `{"x":1,"y":null}`,
			want:  `{"output":{"y":{"x":1}},"status":"succeeded"}`,
		},
		{
			name:  "fail reason",
			graph: wrap(seq("root", "", step("a", "", "", 1), fail("stop", "gave_up"))),
			want:  `{"reason":"gave_up","status":"failed"}`,
		},
		{
			name:     "attempts budget re-dispatches failures",
			graph:    wrap(seq("root", "", step("a", "", "", 3), succeed("done", ""))),
			script:   map[string][]*Outcome{"a": {failed("crash"), failed("timeout")}},
			want:     `{"output":null,"status":"succeeded"}`,
			attempts: map[string][]uint64{"a": {1, 2, 3}},
		},
		{
			name:     "exhausted and unrouted holds",
			graph:    wrap(seq("root", "", step("a", "", "", 2), succeed("done", ""))),
			script:   map[string][]*Outcome{"a": {failed("crash"), failed("crash")}},
			wantErr:  ErrHeld,
			attempts: map[string][]uint64{"a": {1, 2}},
		},
		{
			name: "exhausted and routed continues",
			graph: wrap(seq("root", "", step("a", "", "", 2),
				choice("route", "", succeed("done", ""), branch(inG("a", "error", "", errAll...), fail("broken", "a_failed"))))),
			script:   map[string][]*Outcome{"a": {failed("crash"), failed("refusal")}},
			want:     `{"reason":"a_failed","status":"failed"}`,
			attempts: map[string][]uint64{"a": {1, 2}},
		},
		{
			name:   "choice otherwise",
			graph:  wrap(seq("root", "", verifier("v", "", "", `{"v":["no","ok"]}`, 1), choice("route", "", fail("other", "otherwise_taken"), branch(inG("v", "signal", "v", "ok"), succeed("done", ""))))),
			script: map[string][]*Outcome{"v": {rejected}},
			want:   `{"reason":"otherwise_taken","status":"failed"}`,
		},
		{
			name:    "choice without route",
			graph:   wrap(seq("root", "", verifier("v", "", "", `{"v":["no","ok"]}`, 1), choice("route", "", "", branch(inG("v", "signal", "v", "ok"), succeed("done", ""))))),
			script:  map[string][]*Outcome{"v": {rejected}},
			wantErr: ErrMissingChoiceRoute,
		},
		{
			name:    "root falls off the end",
			graph:   wrap(seq("root", "", step("a", "", "", 1))),
			wantErr: ErrRootCompleted,
		},
		{
			// Attempts are per visit: attempts 1 in a 3-iteration loop is fine.
			name: "loop exhausted, state carried across iterations",
			graph: wrap(seq("root", "",
				loop("l", `[["acc"]]`, step("a", `[`+bind("acc", "state", "acc")+`]`, `[`+write("a", "out", "echo", "acc")+`]`, 1), "", 3),
				choice("route", "", fail("bad", "not_exhausted"), branch(inG("l", "group", "terminated", "exhausted"), succeed("done", `[`+bind("acc", "state", "acc")+`]`))))),
			input:    `{"acc":0}`,
			want:     `{"output":{"acc":{"acc":{"acc":{"acc":0}}}},"status":"succeeded"}`,
			attempts: map[string][]uint64{"a": {1, 1, 1}},
		},
		{
			name: "loop until converged",
			graph: wrap(seq("root", "",
				loop("l", "", verifier("v", "", "", `{"v":["no","ok"]}`, 1), inG("v", "signal", "v", "ok"), 5),
				choice("route", "", fail("bad", "exhausted"), branch(inG("l", "group", "terminated", "converged"), succeed("done", ""))))),
			script:   map[string][]*Outcome{"v": {rejected, rejected, accepted}},
			want:     `{"output":null,"status":"succeeded"}`,
			attempts: map[string][]uint64{"v": {1, 1, 1}},
		},
		{
			name: "loop retries inside an iteration",
			graph: wrap(seq("root", "",
				loop("l", "", verifier("v", "", "", `{"v":["no","ok"]}`, 2), inG("v", "signal", "v", "ok"), 5),
				succeed("done", ""))),
			script:   map[string][]*Outcome{"v": {rejected, failed("crash"), accepted}},
			want:     `{"output":null,"status":"succeeded"}`,
			attempts: map[string][]uint64{"v": {1, 1, 2}},
		},
		{
			name: "map indexed promotion",
			graph: wrap(seq("root", "",
				mapNode("m", `[["out"]]`, step("w", `[`+bind("v", "item", "v")+`]`, `[`+write("w", "out", "echo", "out")+`]`, 1), `{"source":"state","path":["items"]}`, 4),
				succeed("done", `[`+bind("out", "state", "out")+`]`))),
			input: `{"items":[{"v":1},{"v":2},{"v":3}],"out":[]}`,
			want:  `{"output":{"out":[{"v":1},{"v":2},{"v":3}]},"status":"succeeded"}`,
		},
		{
			// A write binding may read a dominating node outside the map.
			name: "write from a node outside the map",
			graph: wrap(seq("root", "", step("a", `[`+bind("k", "state", "k")+`]`, "", 1),
				mapNode("m", `[["x"]]`, step("w", "", `[`+write("a", "out", "echo", "x")+`]`, 1), `{"source":"state","path":["items"]}`, 4),
				succeed("done", `[`+bind("x", "state", "x")+`]`))),
			input: `{"k":7,"items":[1,2],"x":[]}`,
			want:  `{"output":{"x":[{"k":7},{"k":7}]},"status":"succeeded"}`,
		},
		{
			// A par loser inside a loop gets a fresh visit next iteration.
			name: "par any inside a loop",
			graph: wrap(seq("root", "",
				loop("l", "", par("p", "", `{"kind":"any"}`, step("a", "", "", 1), step("b", "", "", 1)), "", 3),
				succeed("done", ""))),
			want:     `{"output":null,"status":"succeeded"}`,
			attempts: map[string][]uint64{"a": {1, 1, 1}, "b": {1, 1, 1}},
		},
		{
			name: "map of zero items",
			graph: wrap(seq("root", "",
				mapNode("m", `[["out"]]`, step("w", "", `[`+write("w", "out", "echo", "out")+`]`, 1), `{"source":"state","path":["items"]}`, 4),
				succeed("done", `[`+bind("out", "state", "out")+`]`))),
			input: `{"items":[],"out":null}`,
			want:  `{"output":{"out":[]},"status":"succeeded"}`,
		},
		{
			name: "map overflow is routable",
			graph: wrap(seq("root", "",
				mapNode("m", "", step("w", "", "", 1), `{"source":"state","path":["items"]}`, 2),
				choice("route", "", succeed("done", ""), branch(inG("m", "group", "overflow", "overflow"), fail("big", "too_many"))))),
			input: `{"items":[1,2,3]}`,
			want:  `{"reason":"too_many","status":"failed"}`,
		},
		{
			name: "map item errors counted by k_of_map",
			graph: wrap(seq("root", "",
				mapNode("m", "", step("w", `[`+bind("v", "item", "v")+`]`, "", 1), `{"source":"state","path":["items"]}`, 4),
				choice("route", "", succeed("done", ""), branch(`{"kind":"k_of_map","count":2,"value":{"name":"w","source":"error","field":null},"labels":["crash"]}`, fail("many", "two_crashed"))))),
			input:  `{"items":[{"v":1},{"v":2},{"v":3}]}`,
			script: map[string][]*Outcome{"w": {failed("crash"), nil, failed("crash")}},
			want:   `{"reason":"two_crashed","status":"failed"}`,
		},
		{
			name: "par all promotes every branch",
			graph: wrap(seq("root", "",
				par("p", `[["a"],["b"]]`, `{"kind":"all"}`, step("sa", "", `[`+write("sa", "out", "echo", "a")+`]`, 1), step("sb", "", `[`+write("sb", "out", "echo", "b")+`]`, 1)),
				choice("route", "", fail("x", "unreached"), branch(inG("p", "group", "joined", "reached"), succeed("done", `[`+bind("a", "state", "a")+`,`+bind("b", "state", "b")+`]`))))),
			input: `{"a":0,"b":0}`,
			want:  `{"output":{"a":null,"b":null},"status":"succeeded"}`,
		},
		{
			name: "par all with a failing branch is unreachable",
			graph: wrap(seq("root", "",
				par("p", "", `{"kind":"all"}`, step("sa", "", "", 1), seq("sb", "", step("sb1", "", "", 1), fail("inner", "inner_fail"))),
				choice("route", "", succeed("done", ""), branch(inG("p", "group", "joined", "quorum_unreachable"), fail("x", "unreachable"))))),
			want: `{"reason":"unreachable","status":"failed"}`,
		},
		{
			name: "par first without satisfier",
			graph: wrap(seq("root", "",
				par("p", "", `{"kind":"first","when":`+`{"kind":"any","guards":[`+inG("va", "signal", "v", "ok")+`,`+inG("vb", "signal", "v", "ok")+`]}}`,
					verifier("va", "", "", `{"v":["no","ok"]}`, 1), verifier("vb", "", "", `{"v":["no","ok"]}`, 1)),
				choice("route", "", succeed("done", ""), branch(inG("p", "group", "raced", "no_satisfier"), fail("x", "nobody"))))),
			script: map[string][]*Outcome{"va": {rejected}, "vb": {rejected}},
			want:   `{"reason":"nobody","status":"failed"}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := mustGraph(t, c.graph)
			in := inputOr(c.input)
			term, h, err := Simulate(g, in, scripted(g, c.script))
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err = %v, want %v", err, c.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if got := outcomeJSON(t, term); got != c.want {
				t.Errorf("terminal %s, want %s", got, c.want)
			}
			for node, want := range c.attempts {
				var got []uint64
				for _, x := range h.Executions {
					if x.Occurrence.Node == node {
						got = append(got, x.Attempt)
					}
				}
				if !equalU(got, want) {
					t.Errorf("%s attempts %v, want %v", node, got, want)
				}
			}
		})
	}
}

func equalU(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHoldThenRetryGrant(t *testing.T) {
	g := mustGraph(t, wrap(seq("root", "", step("a", "", `[`+write("a", "out", "echo", "r")+`]`, 2), succeed("done", `[`+bind("r", "state", "r")+`]`))))
	calls := 0
	worker := func(d Dispatch) Outcome {
		calls++
		if calls <= 2 {
			return *failed("crash")
		}
		return *verified(`{"echo":"fixed"}`)
	}
	_, h, err := Simulate(g, raw(`{"r":""}`), worker)
	if !errors.Is(err, ErrHeld) {
		t.Fatalf("err = %v, want ErrHeld", err)
	}
	r, err := Reduce(g, raw(`{"r":""}`), h)
	if err != nil {
		t.Fatal(err)
	}
	holds := r.Holds()
	if len(holds) != 1 || holds[0].Execution != 2 || holds[0].Attempt != 2 || len(r.Dispatches()) != 0 {
		t.Fatalf("holds %+v dispatches %+v", holds, r.Dispatches())
	}
	h.Grants = append(h.Grants, RetryGrant{Execution: holds[0].Execution})
	r, err = Reduce(g, raw(`{"r":""}`), h)
	if err != nil {
		t.Fatal(err)
	}
	if ds := r.Dispatches(); len(ds) != 1 || ds[0].Attempt != 3 || ds[0].NodeInstance != 1 || ds[0].Execution != 3 {
		t.Fatalf("after grant: %s", decisionsJSON(t, r.Decisions))
	}
	term, _, err := SimulateFrom(g, raw(`{"r":""}`), h, worker)
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomeJSON(t, term); got != `{"output":{"r":"fixed"},"status":"succeeded"}` {
		t.Errorf("terminal %s", got)
	}
}

// TestVoidLosers drives par any/first/quorum and a map terminal by hand and
// checks the void_loser decisions and the history they lead to.
func TestVoidLosers(t *testing.T) {
	errAll := inG("w", "error", "", "timeout", "crash", "malformed", "refusal")
	cases := []struct {
		name  string
		graph string
		input string
		h     []Execution
		want  []string // substrings expected in order in the decisions JSON
		then  []Execution
		final string // terminal after the voids are recorded
	}{
		{
			name:  "any",
			graph: wrap(seq("root", "", par("p", "", `{"kind":"any"}`, step("a", "", "", 1), step("b", "", "", 1)), succeed("done", ""))),
			h:     []Execution{ex(1, 1, 1, "a", nil, 1, `null`), ex(2, 2, 2, "b", nil, 1, `null`).settle(3, verified(`1`))},
			want:  []string{`{"kind":"continue","node":"b"}`, `{"execution":1,"kind":"void_loser","reason":"parallel_join"}`, `{"kind":"continue","node":"p"}`, `"kind":"terminal"`},
			then:  []Execution{ex(1, 1, 1, "a", nil, 1, `null`).void(4, VoidParallelJoin), ex(2, 2, 2, "b", nil, 1, `null`).settle(3, verified(`1`))},
			final: `{"output":null,"status":"succeeded"}`,
		},
		{
			name: "first picks the earliest satisfying branch",
			graph: wrap(seq("root", "", par("p", "", `{"kind":"first","when":{"kind":"any","guards":[`+inG("a", "signal", "v", "ok")+`,`+inG("b", "signal", "v", "ok")+`,`+inG("c", "signal", "v", "ok")+`]}}`,
				verifier("a", "", "", `{"v":["no","ok"]}`, 1), verifier("b", "", "", `{"v":["no","ok"]}`, 1), verifier("c", "", "", `{"v":["no","ok"]}`, 1)),
				choice("route", "", fail("x", "lost"), branch(inG("b", "signal", "v", "ok"), succeed("done", ""))))),
			h: []Execution{
				ex(1, 1, 1, "a", nil, 1, `null`).settle(4, verdict(`null`, map[string]string{"v": "no"}, `null`)),
				ex(2, 2, 2, "b", nil, 1, `null`).settle(5, verdict(`null`, map[string]string{"v": "ok"}, `null`)),
				ex(3, 3, 3, "c", nil, 1, `null`),
			},
			want: []string{`{"execution":3,"kind":"void_loser","reason":"parallel_join"}`, `"status":"succeeded"`},
		},
		{
			name:  "quorum 2 of 3",
			graph: wrap(seq("root", "", par("p", "", `{"kind":"quorum","count":2}`, step("a", "", "", 1), step("b", "", "", 1), step("c", "", "", 1)), succeed("done", ""))),
			h: []Execution{
				ex(1, 1, 1, "a", nil, 1, `null`), ex(2, 2, 2, "b", nil, 1, `null`).settle(5, verified(`1`)),
				ex(3, 3, 3, "c", nil, 1, `null`).settle(4, verified(`1`)),
			},
			want: []string{`{"execution":1,"kind":"void_loser","reason":"parallel_join"}`, `"kind":"terminal"`},
		},
		{
			name: "map terminal voids the other items",
			graph: wrap(seq("root", "", mapNode("m", "", seq("body", "", step("w", `[`+bind("v", "item", "v")+`]`, "", 1),
				choice("route", "", succeed("itemOK", ""), branch(errAll, fail("itemFailed", "item_failed")))), `{"source":"state","path":["items"]}`, 3),
				succeed("done", ""))),
			input: `{"items":[{"v":1},{"v":2},{"v":3}]}`,
			h: []Execution{
				ex(1, 1, 1, "w", []uint64{0}, 1, `{"v":1}`), ex(2, 2, 2, "w", []uint64{1}, 1, `{"v":2}`).settle(4, failed("crash")),
				ex(3, 3, 3, "w", []uint64{2}, 1, `{"v":3}`),
			},
			want: []string{`{"kind":"continue","node":"w"}`, `{"execution":1,"kind":"void_loser","reason":"map_terminal"}`, `{"execution":3,"kind":"void_loser","reason":"map_terminal"}`, `{"kind":"terminal","projection":{"reason":"item_failed","status":"failed"}}`},
			then: []Execution{
				ex(1, 1, 1, "w", []uint64{0}, 1, `{"v":1}`).void(5, VoidMapTerminal), ex(2, 2, 2, "w", []uint64{1}, 1, `{"v":2}`).settle(4, failed("crash")),
				ex(3, 3, 3, "w", []uint64{2}, 1, `{"v":3}`).void(6, VoidMapTerminal),
			},
			final: `{"reason":"item_failed","status":"failed"}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := mustGraph(t, c.graph)
			in := inputOr(c.input)
			r, err := Reduce(g, in, History{Executions: c.h})
			if err != nil {
				t.Fatal(err)
			}
			got := decisionsJSON(t, r.Decisions)
			rest := got
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("decisions %s\nmissing (in order) %s", got, w)
				}
				rest = rest[i+len(w):]
			}
			if c.then == nil {
				return
			}
			r, err = Reduce(g, in, History{Executions: c.then})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Voids()) != 0 {
				t.Errorf("voids again: %s", decisionsJSON(t, r.Decisions))
			}
			if got := outcomeJSON(t, r.Terminal); got != c.final {
				t.Errorf("terminal %s, want %s", got, c.final)
			}
			// A void at or before the claim's cutoff is inconsistent.
			bad := append([]Execution(nil), c.then...)
			for i := range bad {
				if bad[i].State == StateVoided {
					bad[i].Position = bad[i].DispatchPosition + 1
					bad[i].VoidReason = map[VoidReason]VoidReason{VoidParallelJoin: VoidMapTerminal, VoidMapTerminal: VoidParallelJoin}[bad[i].VoidReason]
				}
			}
			if _, err := Reduce(g, in, History{Executions: bad}); !errors.Is(err, ErrInconsistentHistory) {
				t.Errorf("wrong-reason void: err = %v", err)
			}
		})
	}
}
