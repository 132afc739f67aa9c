package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
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

// A versioned ledger's feed cannot tell what changed (every pass asks for
// a full one), it keeps no recovery records, its host faults are not
// recorded, and its claims do not expire.
func (v *versioned) Changes(context.Context) ([]RunRef, bool, error) { return nil, true, nil }
func (v *versioned) RecordGroup(context.Context, RunRef, uint64, worker.Group) error {
	return nil
}
func (v *versioned) Interrupt(context.Context, RunRef, []uint64) error { return nil }
func (v *versioned) Unstarted(context.Context, RunRef, []uint64, string) error {
	return errors.New("unstarted executions are not recorded")
}
func (v *versioned) ClaimTTL() time.Duration                 { return 0 }
func (v *versioned) Renew(context.Context) ([]RunRef, error) { return nil, nil }
func (v *versioned) Release(context.Context, RunRef) error   { return nil }

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

// shareByMaps is share as a direct reading of its rule (counts in maps by
// tenant and run), the reference the slice-indexed share must agree with.
func shareByMaps(s *Supervisor, wants []want) []int {
	grants := make([]int, len(wants))
	perTenant := map[string]int{}
	perRun := map[RunRef]int{}
	free := s.maxActive - s.running.n
	for ref, m := range s.running.byRun {
		perTenant[ref.Tenant] += len(m)
		perRun[ref] = len(m)
	}
	for ; free > 0; free-- {
		best := -1
		for i, w := range wants {
			if grants[i] == len(w.ds) {
				continue
			}
			a, b := w.snap.Ref, RunRef{}
			if best >= 0 {
				b = wants[best].snap.Ref
			}
			if best < 0 || perTenant[a.Tenant] < perTenant[b.Tenant] ||
				(perTenant[a.Tenant] == perTenant[b.Tenant] && perRun[a] < perRun[b]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		ref := wants[best].snap.Ref
		grants[best]++
		perTenant[ref.Tenant]++
		perRun[ref]++
	}
	return grants
}

// TestShareAgreesWithItsRule: over many random mixes of running
// executions, wants (a run may want twice) and bounds, share grants
// exactly what the rule read directly grants.
func TestShareAgreesWithItsRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		s := New(nil, nil, nil)
		ref := func() RunRef {
			return RunRef{Tenant: fmt.Sprint("t", rng.IntN(3)), RunID: fmt.Sprint("r", rng.IntN(6))}
		}
		for i := range rng.IntN(8) {
			s.running.add(runExec{ref(), uint64(i + 1)}, &execHandle{})
		}
		wants := make([]want, rng.IntN(10))
		for i := range wants {
			r := ref()
			wants[i] = wantOf(r.Tenant, r.RunID, rng.IntN(4))
		}
		s.SetMaxActive(1 + rng.IntN(16))
		if got, want := s.share(wants), shareByMaps(s, wants); !slices.Equal(got, want) {
			t.Fatalf("round %d: share %v, rule %v", round, got, want)
		}
	}
}

// TestWaitingRunKeepsItsPlace: a run read again while it waits keeps its
// place in the queue (its new want replaces the old one); a run that
// leaves and comes back waits behind the others.
func TestWaitingRunKeepsItsPlace(t *testing.T) {
	s := New(nil, nil, nil)
	s.SetMaxActive(1)
	var q waitQueue
	q.put(wantOf("t", "a", 1))
	q.put(wantOf("t", "b", 1))
	q.put(wantOf("t", "a", 2)) // read again
	granted := func() string {
		g := q.grant(s)
		if len(g) != 1 {
			t.Fatalf("%d runs granted one slot", len(g))
		}
		g[0].granted = 0
		return g[0].want.snap.Ref.RunID
	}
	if got := granted(); got != "a" {
		t.Fatalf("granted %s, want a (it waited first)", got)
	}
	q.remove(RunRef{Tenant: "t", RunID: "a"})
	q.put(wantOf("t", "a", 1))
	if got := granted(); got != "b" {
		t.Fatalf("granted %s, want b (a came back after it)", got)
	}
	if q.len() != 2 {
		t.Fatalf("%d runs waiting", q.len())
	}
}
