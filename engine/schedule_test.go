package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
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
	s.running.add(runExec{busy, 1}, &execHandle{})
	s.running.add(runExec{busy, 2}, &execHandle{})
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

// versioned is a ledger of one run that counts its snapshots.
type versioned struct {
	Ledger
	version   uint64
	snapshots int
}

func (v *versioned) Running(context.Context) ([]RunRef, error) {
	return []RunRef{{Tenant: "t", RunID: "r"}}, nil
}
func (v *versioned) Claim(context.Context, RunRef) error { return nil }
func (v *versioned) Version(RunRef) uint64               { return v.version }
func (v *versioned) Dispatch(context.Context, RunRef, []Dispatch) error {
	return ErrGateClosed
}
func (v *versioned) ExecutionStarted(RunRef, string) {}
func (v *versioned) ExecutionEnded(RunRef, string)   {}

func (v *versioned) Snapshot(_ context.Context, ref RunRef) (*Snapshot, error) {
	v.snapshots++
	g, err := graph.Decode([]byte(`{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":{"policy":"p@1","default":"deny"},"root":{"kind":"step","name":"s","worker":"w@1","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":600000,"attempts":1}}`))
	return &Snapshot{Ref: ref, Spec: g, Seed: []byte("null"), Dispatch: protocol.DispatchActive, Native: true}, err
}

// TestUnchangedRunIsNotReadAgain: a ledger with versions is read once per
// version of a run, not once per pass.
func TestUnchangedRunIsNotReadAgain(t *testing.T) {
	l := &versioned{version: 7}
	s := New(l, nil, nil)
	ctx := context.Background()
	s.reconcileAll(ctx)
	s.reconcileAll(ctx)
	if l.snapshots != 1 {
		t.Fatalf("%d snapshots for one version", l.snapshots)
	}
	l.version = 8
	s.reconcileAll(ctx)
	if l.snapshots != 2 {
		t.Fatalf("%d snapshots after a change", l.snapshots)
	}
}

// attachOrder records, at each Dispatch, which executions' attach streams
// were open.
type attachOrder struct {
	versioned
	open       map[string]bool
	atDispatch []bool
}

func (a *attachOrder) ExecutionStarted(_ RunRef, x string) { a.open[x] = true }
func (a *attachOrder) ExecutionEnded(_ RunRef, x string)   { delete(a.open, x) }
func (a *attachOrder) Dispatch(_ context.Context, _ RunRef, ds []Dispatch) error {
	for _, d := range ds {
		a.atDispatch = append(a.atDispatch, a.open[d.Ref])
	}
	return ErrGateClosed
}

// TestAttachOpensBeforeTheDispatchCommits: a client that sees an
// execution active (its dispatch committed) can attach to it at once, so
// its attach stream opens before the dispatch commits; a dispatch that
// does not commit closes it again.
func TestAttachOpensBeforeTheDispatchCommits(t *testing.T) {
	l := &attachOrder{versioned: versioned{version: 1}, open: map[string]bool{}}
	s := New(l, nil, nil)
	s.reconcileAll(context.Background())
	if len(l.atDispatch) != 1 || !l.atDispatch[0] {
		t.Fatalf("attach stream open at dispatch: %v", l.atDispatch)
	}
	if len(l.open) != 0 {
		t.Fatalf("streams left open after a refused dispatch: %v", l.open)
	}
}
