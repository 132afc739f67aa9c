package reduce

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/oecp/oecp/graph"
)

// BenchmarkReduceLong times single reductions of a run as it grows, one
// per position of its history (its ended executions in one slice only
// appended to, as the supervisor passes them), with a memo fed every
// position in turn and without one: a map of 1,024 steps (all dispatched at once, settled
// one by one) and two nested loops (10 × 100) around a quorum-of-one par
// of two steps (every iteration has a loser, voided). Reported: the mean
// µs per reduction over the positions [10, 110) (early) and the last 100
// (late), and late/early. Run with:
//
//	go test -run '^$' -bench ReduceLong -benchtime 1x ./engine/reduce/
func BenchmarkReduceLong(b *testing.B) {
	items := make([]any, 1024)
	for i := range items {
		items[i] = map[string]any{"v": json.Number(itoa(i))}
	}
	wide := mustGraph(b, wrap(seq("root", "", mapNode("m", "", step("w", `[`+bind("v", "item", "v")+`]`, "", 1),
		`{"source":"state","path":["items"]}`, 1024), succeed("done", ""))))
	race := par("p", "", `{"kind":"quorum","count":1}`, step("a", "", "", 1), step("b", "", "", 1))
	losers := mustGraph(b, wrap(seq("root", "", loop("outer", "", loop("inner", "", race, "", 100), "", 10), succeed("done", ""))))
	runs := []struct {
		name  string
		g     *graph.GraphSpec
		input json.RawMessage
	}{
		{"map-1024", wide, mustJSON(b, map[string]any{"items": items})},
		{"par-losers-1000", losers, raw("null")},
	}
	for _, run := range runs {
		memoOnly = true
		_, h, err := Simulate(run.g, run.input, echoWorker(run.g))
		memoOnly = false
		if err != nil {
			b.Fatal(err)
		}
		for _, memo := range []bool{true, false} {
			name := run.name + "/memo"
			if !memo {
				name = run.name + "/none"
			}
			b.Run(name, func(b *testing.B) { benchmarkReduceLong(b, run.g, run.input, h, memo) })
		}
	}
}

func benchmarkReduceLong(b *testing.B, g *graph.GraphSpec, input json.RawMessage, h History, memo bool) {
	last := lastPosition(h)
	// What happened at each position: a dispatch (the execution's index)
	// or an end (its index, less one, negated).
	at := make(map[uint64]int, 2*len(h.Executions))
	for i, x := range h.Executions {
		at[x.DispatchPosition] = i
		at[x.Position] = -i - 1
	}
	var early, late time.Duration
	for b.Loop() {
		var m *Memo
		if memo {
			m = &Memo{}
		}
		var ended []Execution // shared by the reductions, as the supervisor's ledger shares it
		var active []Execution
		for pos := uint64(1); pos <= last; pos++ {
			switch i := at[pos]; {
			case i >= 0:
				x := h.Executions[i]
				x.State, x.Position, x.Outcome, x.VoidReason = StateActive, 0, nil, ""
				active = append(active, x)
			default:
				x := h.Executions[-i-1]
				ended = append(ended, x)
				active = slices.DeleteFunc(active, func(a Execution) bool { return a.Execution == x.Execution })
			}
			inEarly, inLate := pos >= 10 && pos < 110, pos+100 > last
			if !memo && !inEarly && !inLate {
				continue
			}
			p := History{Ended: ended, Executions: active}
			t0 := time.Now()
			if _, err := ReduceWith(g, input, p, m); err != nil {
				b.Fatal(err)
			}
			switch d := time.Since(t0); {
			case inEarly:
				early += d
			case inLate:
				late += d
			}
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N*100) }
	b.ReportMetric(per(early), "early-µs/reduce")
	b.ReportMetric(per(late), "late-µs/reduce")
	b.ReportMetric(float64(late)/float64(early), "late/early")
}
