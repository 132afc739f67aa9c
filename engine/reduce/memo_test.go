package reduce

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
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
