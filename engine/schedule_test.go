package engine

import (
	"slices"
	"testing"

	"github.com/oecp/oecp/engine/reduce"
)

func wantOf(tenant, run string, n int) want {
	return want{snap: &Snapshot{Ref: RunRef{Tenant: tenant, RunID: run}}, ds: make([]reduce.Dispatch, n)}
}

// TestShareIsFairAcrossTenantsThenRuns: free slots go to the tenant with
// the fewest executions first, then to its run with the fewest; no bound
// starts everything.
func TestShareIsFairAcrossTenantsThenRuns(t *testing.T) {
	s := New(nil, nil, nil)
	busy := RunRef{Tenant: "a", RunID: "a1"}
	s.running[runExec{busy, 1}] = &execHandle{}
	s.running[runExec{busy, 2}] = &execHandle{}
	wants := []want{wantOf("a", "a1", 3), wantOf("a", "a2", 3), wantOf("b", "b1", 3), wantOf("b", "b2", 1)}

	if got := s.share(wants); !slices.Equal(got, []int{3, 3, 3, 1}) {
		t.Fatalf("unbounded: %v", got)
	}
	s.SetMaxActive(3) // one free slot: tenant b has none running
	if got := s.share(wants); !slices.Equal(got, []int{0, 0, 1, 0}) {
		t.Fatalf("one slot: %v", got)
	}
	s.SetMaxActive(6) // four: b1, b2, then a2 (a's idle run) and b1 again
	if got := s.share(wants); !slices.Equal(got, []int{0, 1, 2, 1}) {
		t.Fatalf("four slots: %v", got)
	}
	s.SetMaxActive(2) // full
	if got := s.share(wants); !slices.Equal(got, []int{0, 0, 0, 0}) {
		t.Fatalf("no slot: %v", got)
	}
}
