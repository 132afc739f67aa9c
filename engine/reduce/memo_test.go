package reduce

import (
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/oecp/oecp/graph"
)

// TestMemoResumesLoops: a run of nested loops reduced turn by turn with
// one memo (Simulate checks every turn against Reduce) keeps loop points
// and reduces each prefix of its history as Reduce does; the same holds
// with failures routed or held and retried under a grant.
func TestMemoResumesLoops(t *testing.T) {
	body := seq("body", "", step("a", "", "", 2), step("b", "", "", 1))
	g := mustGraph(t, wrap(seq("root", "", loop("outer", "", loop("inner", "", body, "", 6), "", 5), succeed("done", ""))))
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 7))
		term, h, err := Simulate(g, json.RawMessage("null"), typedWorker(t, g, rng, 10*int(seed)))
		if err != nil && err != ErrHeld {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err == nil && term.Status != TerminalSucceeded {
			t.Fatalf("seed %d: %+v", seed, term)
		}
		// A fresh memo over growing prefixes, and points are kept; the
		// same with the prefixes as Ended, one shared slice.
		m := &Memo{}
		for n := 0; n <= len(h.Executions); n += 3 {
			p := History{Executions: h.Executions[:n], Grants: h.Grants}
			r, err := Reduce(g, json.RawMessage("null"), p)
			if err := sameReduction(r, err, m, g, json.RawMessage("null"), p); err != nil {
				t.Fatalf("seed %d, %d executions: %v", seed, n, err)
			}
			q := History{Ended: h.Executions[:n], Grants: h.Grants}
			if err := sameReduction(r, err, m, g, json.RawMessage("null"), q); err != nil {
				t.Fatalf("seed %d, %d executions ended: %v", seed, n, err)
			}
		}
		if seed == 0 && len(m.loops.cur) == 0 {
			t.Fatal("no loop point kept")
		}
		// In any order (the memo's index falls back to the full one).
		rev := History{Executions: slices.Clone(h.Executions), Grants: h.Grants}
		slices.Reverse(rev.Executions)
		for range 2 {
			r, err := Reduce(g, json.RawMessage("null"), rev)
			if err := sameReduction(r, err, m, g, json.RawMessage("null"), rev); err != nil {
				t.Fatalf("seed %d, reversed: %v", seed, err)
			}
		}
	}
}

// historyAt is h as it stood at position pos: the executions dispatched
// by then, those that ended later still active, and the grants naming an
// execution that had settled.
func historyAt(h History, pos uint64) History {
	var out History
	settled := map[uint64]bool{}
	for _, x := range h.Executions {
		if x.DispatchPosition > pos {
			continue
		}
		if x.Position > pos {
			x.State, x.Position, x.Outcome, x.VoidReason = StateActive, 0, nil, ""
		}
		settled[x.Execution] = x.State == StateSettled
		out.Executions = append(out.Executions, x)
	}
	for _, g := range h.Grants {
		if settled[g.Execution] {
			out.Grants = append(out.Grants, g)
		}
	}
	return out
}

// lastPosition is the highest position of h.
func lastPosition(h History) uint64 {
	var pos uint64
	for _, x := range h.Executions {
		pos = max(pos, x.DispatchPosition, x.Position)
	}
	return pos
}

// memoGraphs are wide maps and loops of pars with losers: a map whose
// items race two paths (their losers voided or settled late), and two
// nested loops around a quorum-of-one par of three steps, or of two steps
// and a seq (whose voided first step the next iteration matches again).
func memoGraphs(t testing.TB) map[string]*graph.GraphSpec {
	gs := extraGraphs(t)
	race := par("race", "", `{"kind":"quorum","count":1}`, step("a", `[`+bind("v", "item", "v")+`]`, "", 2),
		seq("bs", "", step("b1", "", "", 1), step("b2", "", "", 1)))
	gs["wide-map-race"] = mustGraph(t, wrap(seq("root", "",
		mapNode("m", "", seq("body", "", step("w", `[`+bind("v", "item", "v")+`]`, "", 2), race), `{"source":"state","path":["items"]}`, 64),
		succeed("done", ""))))
	three := par("p", "", `{"kind":"quorum","count":1}`, step("a", "", "", 2), step("b", "", "", 1), step("c", "", "", 1))
	gs["loop-par-losers"] = mustGraph(t, wrap(seq("root", "", loop("outer", "", loop("inner", "", three, "", 6), "", 4), succeed("done", ""))))
	withSeq := par("p", "", `{"kind":"quorum","count":1}`, step("a", "", "", 2), step("b", "", "", 1), seq("cs", "", step("c1", "", "", 1), step("c2", "", "", 1)))
	gs["loop-par-seq-losers"] = mustGraph(t, wrap(seq("root", "", loop("outer", "", loop("inner", "", withSeq, "", 6), "", 4), succeed("done", ""))))
	for _, k := range []string{"wide-map-race", "loop-par-losers", "loop-par-seq-losers"} {
		gs[k].InitialInput = gs["map-terminal"].InitialInput
	}
	return gs
}

// TestMemoMapsAndParLosers: runs of wide maps and of loops around pars
// with losers, reduced with one memo at every position of their history
// as the supervisor sees it (executions that end later still active),
// reduce as Reduce does; the memo keeps map items and resumes loops past
// iterations with losers.
func TestMemoMapsAndParLosers(t *testing.T) {
	gs := memoGraphs(t)
	names := slices.Sorted(maps.Keys(gs))
	seeds := uint64(6)
	if testing.Short() {
		seeds = 2
	}
	items, iters := map[string]int{}, map[string]uint64{}
	for _, name := range names {
		g := gs[name]
		for seed := range seeds {
			rng := rand.New(rand.NewPCG(seed, 11))
			input := mustJSON(t, genValue(g.InitialInput, rng, 3+int(seed)*4))
			pick := func(a []int) int { return a[rng.IntN(len(a))] }
			_, h, err := drive(g, input, History{}, typedWorker(t, g, rng, []int{0, 10, 30}[seed%3]), pick)
			if err != nil && !errors.Is(err, ErrHeld) && FailureReason(err) == "reducer_error" {
				t.Fatalf("%s/%d: %v", name, seed, err)
			}
			m := &Memo{}
			for pos := range lastPosition(h) + 1 {
				p := historyAt(h, pos)
				r, err := Reduce(g, input, p)
				if err := sameReduction(r, err, m, g, input, p); err != nil {
					t.Fatalf("%s/%d at %d: %v", name, seed, pos, err)
				}
				for _, pt := range m.loops.cur {
					iters[name] = max(iters[name], pt.iter)
				}
			}
			for _, pt := range m.maps.cur {
				for _, ip := range pt.items {
					if ip != nil {
						items[name]++
					}
				}
			}
		}
	}
	t.Logf("items kept %v, most iterations resumed %v", items, iters)
	if items["wide-map-race"] == 0 || items["loop-map-par"] == 0 {
		t.Errorf("map items kept: %v", items)
	}
	if iters["loop-par-losers"] < 3 || iters["loop-par-any"] < 2 {
		t.Errorf("loop points past a par with losers: %v", iters)
	}
}
