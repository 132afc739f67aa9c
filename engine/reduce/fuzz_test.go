package reduce

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/oecp/oecp/graph"
)

// FuzzReduce checks that Reduce never panics and only fails with its
// sentinel errors, and that a memo changes nothing but the trace
// decisions, on histories obtained by simulating a fixture graph and then
// mutating executions and grants byte by byte.
func FuzzReduce(f *testing.F) {
	graphs := loadFixtures(f)
	for k, v := range memoGraphs(f) {
		graphs[k] = v
	}
	names := make([]string, 0, len(graphs))
	for n := range graphs {
		names = append(names, n)
	}
	sort.Strings(names)
	for i := range names {
		f.Add([]byte{byte(i), 1, 30})
		f.Add([]byte{byte(i), 2, 50, 0, 0, 1, 1, 3, 2, 2, 5, 0})
		f.Add([]byte{byte(i), 3, 0, 1, 7, 9, 0, 6, 1})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		g := graphs[names[int(data[0])%len(names)]]
		rng := rand.New(rand.NewPCG(uint64(data[1]), 3))
		input := mustJSON(t, genValue(g.InitialInput, rng, 1+int(data[1])%3))
		_, h, _ := drive(g, input, History{}, typedWorker(t, g, rng, int(data[2])%101), func(a []int) int { return a[rng.IntN(len(a))] })
		ops := data[3:]
		for len(ops) >= 3 && len(h.Executions) > 0 {
			x := &h.Executions[int(ops[0])%len(h.Executions)]
			v := uint64(ops[2])
			switch ops[1] % 12 {
			case 0:
				x.DispatchPosition = v
			case 1:
				x.Position = v
			case 2:
				x.Attempt = v
			case 3:
				x.Execution = v
			case 4:
				x.NodeInstance = v
			case 5:
				x.State = []ExecutionState{StateActive, StateSettled, StateVoided, "bogus"}[v%4]
			case 6:
				x.Outcome = []*Outcome{nil, failed("crash"), verified(`{}`), verdict(`null`, map[string]string{"verdict": "accepted"}, `{"x":1}`), {Status: "weird"}, verified(`{"x":`)}[v%6]
			case 7:
				x.VoidReason = []VoidReason{VoidParallelJoin, VoidMapTerminal, ""}[v%3]
			case 8:
				x.Occurrence.MapIndices = append(x.Occurrence.MapIndices, v%4)
			case 9:
				x.Input = json.RawMessage([]string{`null`, `{}`, `{"v":1}`, `[`, ``}[v%5])
			case 10:
				h.Grants = append(h.Grants, RetryGrant{Execution: v})
			case 11:
				h.Executions = append(h.Executions[:int(ops[0])%len(h.Executions)], h.Executions[int(ops[0])%len(h.Executions)+1:]...)
			}
			ops = ops[3:]
		}
		r, err := Reduce(g, input, h)
		// With a memo, twice (the second reduction resumes loops and
		// replays map items), as without.
		m := &Memo{}
		for range 2 {
			if err := sameReduction(r, err, m, g, input, h); err != nil {
				t.Fatal(err)
			}
		}
		if err != nil {
			if FailureReason(err) == "reducer_error" {
				t.Fatalf("non-sentinel error %v", err)
			}
			return
		}
		if _, err := json.Marshal(r.Decisions); err != nil {
			t.Fatalf("decisions do not encode: %v", err)
		}
		if r.Terminal != nil && r.Decisions[len(r.Decisions)-1].Kind != DecisionTerminal {
			t.Fatal("terminal is not the last decision")
		}
	})
}

func TestReduceRejectsBrokenGraphs(t *testing.T) {
	cases := map[string]*graph.GraphSpec{
		"nil":       nil,
		"nil root":  {},
		"nil child": {Root: &graph.Seq{Name: "root", Children: []graph.Node{nil}}},
		"duplicate": {Root: &graph.Seq{Name: "root", Children: []graph.Node{&graph.Fail{Name: "root", Reason: "x"}}}},
		"first without when": {Root: &graph.Par{Name: "p", Join: graph.Join{Kind: graph.JoinFirst},
			Branches: []graph.Node{&graph.Fail{Name: "f", Reason: "x"}}}},
	}
	for name, g := range cases {
		if _, err := Reduce(g, nil, History{}); !errors.Is(err, ErrInvalidGraph) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}
