package reduce

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/oecp/oecp/graph"
)

// genValue builds a deterministic value of type p (every optional field
// present, arrays of n items).
func genValue(p graph.PayloadType, rng *rand.Rand, n int) any {
	switch p.Kind {
	case graph.PayloadBoolean:
		return rng.IntN(2) == 0
	case graph.PayloadInteger:
		return json.Number(itoa(rng.IntN(100)))
	case graph.PayloadNumber:
		return json.Number(itoa(rng.IntN(100)))
	case graph.PayloadString:
		return "s" + itoa(rng.IntN(100))
	case graph.PayloadEnum:
		return p.Values[rng.IntN(len(p.Values))]
	case graph.PayloadArray:
		out := make([]any, n)
		for i := range out {
			out[i] = genValue(*p.Items, rng, n)
		}
		return out
	case graph.PayloadRecord:
		out := map[string]any{}
		for f, rf := range p.Fields {
			out[f] = genValue(rf.Type, rng, n)
		}
		return out
	}
	return nil
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	b, err := canonical(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// typedWorker answers with values of the node's declared types; failRate
// percent of executions fail with a random error code.
func typedWorker(t testing.TB, g *graph.GraphSpec, rng *rand.Rand, failRate int) Worker {
	codes := []string{"timeout", "crash", "malformed", "refusal"}
	return func(d Dispatch) Outcome {
		if rng.IntN(100) < failRate {
			return Outcome{Status: OutcomeError, Code: codes[rng.IntN(4)], Reason: "declared_failure"}
		}
		n, _ := findNode(g, d.Occurrence.Node)
		switch x := n.(type) {
		case *graph.Verifier:
			sig := map[string]string{}
			for f, ls := range x.Signals {
				sig[f] = ls[rng.IntN(len(ls))]
			}
			return Outcome{Status: OutcomeVerifier, Output: mustJSON(t, genValue(x.Output, rng, 2)), Signals: sig, Diagnostic: mustJSON(t, genValue(x.Diagnostic, rng, 2))}
		case *graph.Step:
			return Outcome{Status: OutcomeVerified, Output: mustJSON(t, genValue(x.Output, rng, 2))}
		}
		t.Fatalf("dispatch of %q", d.Occurrence.Node)
		return Outcome{}
	}
}

func loadFixtures(t testing.TB) map[string]*graph.GraphSpec {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "oecp-v1", "fixtures", "verifier", "positive", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no verifier fixtures under testdata/oecp-v1 (%v)", err)
	}
	out := map[string]*graph.GraphSpec{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Graph json.RawMessage `json:"graph"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		g, err := graph.Decode(doc.Graph)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = g
	}
	return out
}

// extraGraphs are hand-written graphs covering loops around pars and maps
// (the fixtures have no such nesting).
func extraGraphs(t testing.TB) map[string]*graph.GraphSpec {
	itemT := graph.PayloadType{Kind: graph.PayloadRecord, Fields: map[string]graph.RecordField{"v": {Type: graph.PayloadType{Kind: graph.PayloadInteger}, Required: true}}}
	inT := graph.PayloadType{Kind: graph.PayloadRecord, Fields: map[string]graph.RecordField{"items": {Type: graph.PayloadType{Kind: graph.PayloadArray, Items: &itemT}, Required: true}}}
	gs := map[string]*graph.GraphSpec{
		"loop-par-any": mustGraph(t, wrap(seq("root", "",
			loop("l", "", par("p", "", `{"kind":"any"}`, step("a", "", "", 2), seq("bs", "", step("b1", "", "", 1), step("b2", "", "", 1))), "", 3),
			succeed("done", "")))),
		"loop-map-par": mustGraph(t, wrap(seq("root", "",
			loop("l", "", mapNode("m", "", par("p", "", `{"kind":"quorum","count":1}`, step("a", `[`+bind("v", "item", "v")+`]`, "", 2), step("b", "", "", 1)), `{"source":"state","path":["items"]}`, 4), "", 2),
			succeed("done", "")))),
		"map-terminal": mustGraph(t, wrap(seq("root", "", mapNode("m", "", seq("body", "", step("w", `[`+bind("v", "item", "v")+`]`, "", 2),
			choice("route", "", succeed("itemOK", ""), branch(inG("w", "error", "", "timeout", "crash", "malformed", "refusal"), fail("itemFailed", "item_failed")))),
			`{"source":"state","path":["items"]}`, 4), succeed("done", "")))),
	}
	for _, g := range gs {
		g.InitialInput = inT
	}
	return gs
}

// TestPropertyReplay simulates many runs over the verifier fixtures with a
// random settle order and random worker failures, then checks that
// replaying the final history in any order gives the same decisions, that
// the run ended (terminal, hold or reducer error) within its bounds, and
// that a hold is always resumable by a grant.
func TestPropertyReplay(t *testing.T) {
	graphs := loadFixtures(t)
	for k, v := range extraGraphs(t) {
		graphs[k] = v
	}
	if len(graphs) < 10 {
		t.Fatalf("only %d graphs", len(graphs))
	}
	names := make([]string, 0, len(graphs))
	for n := range graphs {
		names = append(names, n)
	}
	sort.Strings(names)
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	stats := map[string]int{}
	for _, name := range names {
		g := graphs[name]
		var maxAttempts uint64 = 1
		graph.Walk(g, func(n graph.Node, _ graph.Path, _ int) bool {
			switch x := n.(type) {
			case *graph.Step:
				maxAttempts = max(maxAttempts, x.Attempts)
			case *graph.Verifier:
				maxAttempts = max(maxAttempts, x.Attempts)
			}
			return true
		})
		bounds, diags := graph.ComputeBounds(g)
		if len(diags) > 0 {
			t.Fatalf("%s: %v", name, diags)
		}
		for seed := range seeds {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			input := mustJSON(t, genValue(g.InitialInput, rng, 1+seed%3))
			worker := typedWorker(t, g, rng, []int{0, 20, 50}[seed%3])
			pick := func(active []int) int { return active[rng.IntN(len(active))] }
			var h History
			var term *Terminal
			var err error
			for grants := 0; ; grants++ {
				term, h, err = drive(g, input, h, worker, pick)
				if !errors.Is(err, ErrHeld) || grants == 3 {
					break
				}
				r, rerr := Reduce(g, input, h)
				if rerr != nil || len(r.Holds()) == 0 {
					t.Fatalf("%s/%d: held but Reduce gives %v %+v", name, seed, rerr, r)
				}
				for _, hd := range r.Holds() {
					h.Grants = append(h.Grants, RetryGrant{Execution: hd.Execution})
				}
			}
			switch {
			case term != nil:
				stats[string(term.Status)]++
			case errors.Is(err, ErrHeld):
				stats["held"]++
			case errors.Is(err, ErrNoProgress):
				t.Fatalf("%s/%d: %v", name, seed, err)
			default:
				stats["error:"+FailureReason(err)]++
				if seed < 3 {
					t.Logf("%s/%d: %v", name, seed, err)
				}
			}
			for _, x := range h.Executions {
				if x.State == StateVoided {
					stats["voided:"+string(x.VoidReason)]++
				}
				if x.Attempt > 1 {
					stats["retried"]++
				}
			}
			// Bounded: every execution is a visit attempt of the bounds fold.
			limit := int(bounds.MaxNodeExecutions * (maxAttempts + 4))
			if len(h.Executions) > limit {
				t.Fatalf("%s/%d: %d executions > %d", name, seed, len(h.Executions), limit)
			}
			want, wantErr := Reduce(g, input, h)
			if (wantErr == nil) != (err == nil || errors.Is(err, ErrHeld)) {
				t.Fatalf("%s/%d: drive err %v, replay err %v", name, seed, err, wantErr)
			}
			if term != nil && outcomeJSON(t, want.Terminal) != outcomeJSON(t, term) {
				t.Fatalf("%s/%d: replay terminal %s vs %s", name, seed, outcomeJSON(t, want.Terminal), outcomeJSON(t, term))
			}
			wantJSON := ""
			if wantErr == nil {
				wantJSON = decisionsJSON(t, want.Decisions)
			}
			for range 3 {
				sh := History{Executions: slices.Clone(h.Executions), Grants: slices.Clone(h.Grants)}
				rng.Shuffle(len(sh.Executions), func(i, j int) { sh.Executions[i], sh.Executions[j] = sh.Executions[j], sh.Executions[i] })
				rng.Shuffle(len(sh.Grants), func(i, j int) { sh.Grants[i], sh.Grants[j] = sh.Grants[j], sh.Grants[i] })
				got, gotErr := Reduce(g, input, sh)
				if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
					t.Fatalf("%s/%d: shuffled err %v vs %v", name, seed, gotErr, wantErr)
				}
				if gotErr == nil && decisionsJSON(t, got.Decisions) != wantJSON {
					t.Fatalf("%s/%d: shuffled decisions differ\n%s\n%s", name, seed, decisionsJSON(t, got.Decisions), wantJSON)
				}
			}
		}
	}
	t.Logf("outcomes: %v", stats)
}
