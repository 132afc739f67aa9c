package runs_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/verifier"
)

// TestAdmissionVerifiesEachGraphOnce: a graph the verifier accepted is
// not verified again for a later submission with the same graph; a
// different graph, a rejected one and one whose verification failed are
// verified every time, and each answer is the verifier's.
func TestAdmissionVerifiesEachGraphOnce(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	failNext := true
	verify := func(ctx context.Context, g *graph.GraphSpec, reg verifier.Registry) (verifier.Result, error) {
		instr := *executablesInstructions(g)
		mu.Lock()
		defer mu.Unlock()
		calls[instr]++
		switch {
		case strings.HasPrefix(instr, "bad"):
			return verifier.Result{Status: verifier.StatusRejected, Diagnostics: []graph.Diagnostic{}}, nil
		case strings.HasPrefix(instr, "flaky") && failNext:
			failNext = false
			return verifier.Result{}, errors.New("verifier unavailable")
		}
		return runs.VerifyDirect(ctx, g, reg)
	}
	b := runs.New(runs.Config{Agents: newFakeAgents(), Verify: verify, Log: slog.New(slog.DiscardHandler)})
	defer b.Close()
	ctx := as("alice")
	submit := func(id, key, instr string) error {
		_, err := b.Submit(ctx, id, oneStep(key, instr))
		return err
	}
	for i, id := range []string{"a1", "a2", "a3"} {
		if err := submit(id, id, "good"); err != nil {
			t.Fatalf("submission %d: %v", i, err)
		}
	}
	if err := submit("b1", "b1", "other"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c1", "c2"} {
		if err := submit(id, id, "bad"); errCode(err) != protocol.GraphInvalid {
			t.Fatalf("rejected graph %s: %v", id, err)
		}
	}
	if err := submit("d1", "d1", "flaky"); err == nil {
		t.Fatal("a verifier error admitted the run")
	}
	if err := submit("d2", "d2", "flaky"); err != nil {
		t.Fatalf("after a verifier error: %v", err)
	}
	want := map[string]int{"good": 1, "other": 1, "bad": 2, "flaky": 2}
	mu.Lock()
	defer mu.Unlock()
	for instr, n := range want {
		if calls[instr] != n {
			t.Errorf("graph %q verified %d times, want %d", instr, calls[instr], n)
		}
	}
}

// executablesInstructions is the instructions of the graph's one step.
func executablesInstructions(g *graph.GraphSpec) *string {
	var out *string
	graph.Walk(g, func(n graph.Node, _ graph.Path, _ int) bool {
		if st, ok := n.(*graph.Step); ok {
			out = st.Instructions
		}
		return true
	})
	return out
}
