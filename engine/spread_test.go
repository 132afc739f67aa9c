package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/protocol"
)

// sharedLeases are run claims that expire, shared by the supervisors of
// several processes: a run is claimed by at most one owner.
type sharedLeases struct {
	mu    sync.Mutex
	owner map[RunRef]string
	runs  []RunRef
}

// replicaLedger is one process's view of many runs (each wants to
// dispatch, and the gate refuses) over sharedLeases.
type replicaLedger struct {
	versioned
	leases *sharedLeases
	name   string
}

func (l *replicaLedger) Running(context.Context) ([]RunRef, error) { return l.leases.runs, nil }

func (l *replicaLedger) Claim(_ context.Context, ref RunRef) error {
	l.leases.mu.Lock()
	defer l.leases.mu.Unlock()
	if o := l.leases.owner[ref]; o != "" && o != l.name {
		return fmt.Errorf("%w: %s holds it", ErrClaimedElsewhere, o)
	}
	l.leases.owner[ref] = l.name
	return nil
}

func (l *replicaLedger) ClaimTTL() time.Duration                 { return time.Minute }
func (l *replicaLedger) Renew(context.Context) ([]RunRef, error) { return nil, nil }
func (l *replicaLedger) Release(_ context.Context, ref RunRef) error {
	l.leases.mu.Lock()
	defer l.leases.mu.Unlock()
	if l.leases.owner[ref] == l.name {
		delete(l.leases.owner, ref)
	}
	return nil
}

func (s *sharedLeases) count(owner string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, o := range s.owner {
		if o == owner {
			n++
		}
	}
	return n
}

// TestReplicaClaimsOnlyWhatItCanRun: where claims expire, a replica with
// two execution slots claims two runs and a margin of one, not every run
// it lists, so another replica (a survivor of a dead one) gets the rest.
// The unclaimed runs are claimed as claims go.
func TestReplicaClaimsOnlyWhatItCanRun(t *testing.T) {
	leases := &sharedLeases{owner: map[RunRef]string{}}
	for i := range 8 {
		leases.runs = append(leases.runs, RunRef{Tenant: "t", RunID: fmt.Sprint("r", i)})
	}
	ctx := context.Background()
	a := New(&replicaLedger{versioned: versioned{version: 1}, leases: leases, name: "a"}, nil, nil)
	b := New(&replicaLedger{versioned: versioned{version: 1}, leases: leases, name: "b"}, nil, nil)
	a.SetMaxActive(2)
	b.SetMaxActive(2)
	a.reconcileAll(ctx)
	b.reconcileAll(ctx)
	if n := leases.count("a"); n != 3 {
		t.Fatalf("the first replica claimed %d runs, want its 2 slots and a margin of 1", n)
	}
	if n := leases.count("b"); n != 3 {
		t.Fatalf("the second replica claimed %d runs, want 3", n)
	}
	// A claim goes (its run finished elsewhere): the next incremental
	// pass claims one from the backlog, without listing the runs.
	var gone RunRef
	for ref := range a.claimed {
		gone = ref
		break
	}
	a.drop(ctx, gone)
	if n := leases.count("a"); n != 2 {
		t.Fatalf("after a drop: %d claims", n)
	}
	a.reconcileSome(ctx, nil)
	if n := leases.count("a"); n != 3 {
		t.Fatalf("after a drop and a pass: %d claims, want 3", n)
	}
}

// TestClaimSpreadIsFairAcrossTenants: at the claim cap, the runs claimed
// are spread across tenants (fewest claimed first), not the oldest runs
// of the tenant that listed first.
func TestClaimSpreadIsFairAcrossTenants(t *testing.T) {
	leases := &sharedLeases{owner: map[RunRef]string{}}
	for i := range 6 {
		leases.runs = append(leases.runs, RunRef{Tenant: "busy", RunID: fmt.Sprint("b", i)})
	}
	leases.runs = append(leases.runs, RunRef{Tenant: "quiet", RunID: "q"})
	s := New(&replicaLedger{versioned: versioned{version: 1}, leases: leases, name: "a"}, nil, nil)
	s.SetMaxActive(2)
	s.reconcileAll(context.Background())
	if !s.claimed[RunRef{Tenant: "quiet", RunID: "q"}] {
		t.Fatalf("claimed %v: the quiet tenant's run waits behind the busy one's", s.claimed)
	}
}

// TestLocalLedgerClaimsOnlyWhatItCanRun: where claims do not expire (one
// process owns the ledger) the claims are bounded all the same once the
// first full pass is done, so that what the supervisor holds for a deep
// queue (its claims, the runs it has read, the workspaces prepared
// ahead) does not grow with the queue; the backlog is claimed from as
// claimed runs go.
func TestLocalLedgerClaimsOnlyWhatItCanRun(t *testing.T) {
	l := &missedWake{versioned: versioned{version: 1}}
	s := New(l, nil, nil)
	s.SetMaxActive(4)
	s.reconcileAll(context.Background()) // the first pass, on an empty ledger
	l.mu.Lock()
	for i := range 9 {
		l.runs = append(l.runs, RunRef{Tenant: "t", RunID: fmt.Sprint("r", i)})
	}
	l.mu.Unlock()
	s.reconcileAll(context.Background())
	if len(s.claimed) != 5 || s.spread.len() != 4 {
		t.Fatalf("claimed %d of 9 runs on a local ledger with 4 slots (backlog %d), want 5 and 4", len(s.claimed), s.spread.len())
	}
	for i := range 5 {
		if !s.claimed[l.runs[i]] {
			t.Fatalf("claimed %v: not the oldest five", s.claimed)
		}
	}
	s.drop(context.Background(), l.runs[0])
	s.reconcileSome(context.Background(), nil)
	if len(s.claimed) != 5 || !s.claimed[l.runs[5]] {
		t.Fatalf("after a drop and a pass: claimed %v, want the next run claimed from the backlog", s.claimed)
	}
}

// TestLocalLedgerClaimsEveryRunAtStart: the first full pass of a
// supervisor whose claims do not expire claims every running run (those
// a crash left executing among them, so that their executions are
// settled at once); the runs that come later wait in the backlog.
func TestLocalLedgerClaimsEveryRunAtStart(t *testing.T) {
	l := &missedWake{versioned: versioned{version: 1}}
	for i := range 9 {
		l.runs = append(l.runs, RunRef{Tenant: "t", RunID: fmt.Sprint("r", i)})
	}
	s := New(l, nil, nil)
	s.SetMaxActive(4)
	s.reconcileAll(context.Background())
	if len(s.claimed) != 9 {
		t.Fatalf("the first pass claimed %d of 9 runs on a local ledger", len(s.claimed))
	}
	l.mu.Lock()
	l.runs = append(l.runs, RunRef{Tenant: "t", RunID: "late"})
	l.mu.Unlock()
	s.reconcileAll(context.Background())
	if len(s.claimed) != 9 || s.spread.len() != 1 {
		t.Fatalf("a later pass: claimed %d, backlog %d; want 9 and the late run waiting", len(s.claimed), s.spread.len())
	}
}

// TestUnboundedLocalLedgerClaimsEveryRun: with no bound on executions
// every running run is claimed.
func TestUnboundedLocalLedgerClaimsEveryRun(t *testing.T) {
	l := &missedWake{versioned: versioned{version: 1}}
	for i := range 5 {
		l.runs = append(l.runs, RunRef{Tenant: "t", RunID: fmt.Sprint("r", i)})
	}
	s := New(l, nil, nil)
	s.reconcileAll(context.Background())
	if len(s.claimed) != 5 {
		t.Fatalf("claimed %d of 5 runs on a local ledger without a bound", len(s.claimed))
	}
}

// gatedRuns is a local ledger whose runs named "held…" are suspended by
// a person and those named "prep…" wait for their host to prepare them;
// every other run's gate is open (and refuses each dispatch).
type gatedRuns struct{ missedWake }

func (g *gatedRuns) Snapshot(ctx context.Context, ref RunRef) (*Snapshot, error) {
	snap, err := g.versioned.Snapshot(ctx, ref)
	if err == nil && strings.HasPrefix(ref.RunID, "held") {
		snap.Dispatch = protocol.DispatchSuspended
	}
	if err == nil && strings.HasPrefix(ref.RunID, "prep") {
		snap.Dispatch, snap.Preparing = protocol.DispatchSuspended, true
	}
	return snap, err
}

// TestIdleClaimsDoNotHoldTheBacklog: claimed runs that wait for a person
// (suspended, held for a retry grant) with nothing running do not count
// against the claim cap, so runs in the backlog are claimed past them;
// runs whose host prepares them do count, so a deep queue of them is not
// all prepared at once.
func TestIdleClaimsDoNotHoldTheBacklog(t *testing.T) {
	for _, c := range []struct {
		first   string
		claimed bool // whether the backlog's runs are claimed past them
	}{{"held", true}, {"prep", false}} {
		l := &gatedRuns{missedWake{versioned: versioned{version: 1}}}
		s := New(l, nil, nil)
		s.SetMaxActive(1) // two claims: one slot and the margin
		ctx := context.Background()
		s.reconcileAll(ctx) // the first pass, on an empty ledger
		l.mu.Lock()
		l.runs = []RunRef{{Tenant: "t", RunID: c.first + "0"}, {Tenant: "t", RunID: c.first + "1"}}
		for i := range 3 {
			l.runs = append(l.runs, RunRef{Tenant: "t", RunID: fmt.Sprint("a", i)})
		}
		l.mu.Unlock()
		s.reconcileAll(ctx)
		if len(s.claimed) != 2 || !s.claimed[l.runs[0]] || !s.claimed[l.runs[1]] {
			t.Fatalf("%s: claimed %v, want the two oldest", c.first, s.claimed)
		}
		s.reconcileSome(ctx, nil)
		a0, a1, a2 := l.runs[2], l.runs[3], l.runs[4]
		if got := s.claimed[a0] && s.claimed[a1]; got != c.claimed || s.claimed[a2] {
			t.Fatalf("%s: claimed %v; backlog's oldest two claimed: %v, want %v (and never a2)", c.first, s.claimed, got, c.claimed)
		}
	}
}

// resumable holds the runs named held… suspended until resumed.
type resumable struct {
	missedWake
	resumed map[string]bool // guarded by missedWake.mu
}

func (r *resumable) Snapshot(ctx context.Context, ref RunRef) (*Snapshot, error) {
	snap, err := r.versioned.Snapshot(ctx, ref)
	r.mu.Lock()
	resumed := r.resumed[ref.RunID]
	r.mu.Unlock()
	if err == nil && strings.HasPrefix(ref.RunID, "held") && !resumed {
		snap.Dispatch = protocol.DispatchSuspended
	}
	return snap, err
}

// setRuns lists refs as the ledger's running runs.
func (r *resumable) setRuns(refs ...RunRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = refs
}

// TestResumedRunCountsBeforeTheBacklogIsClaimed: a suspended run that
// resumes in the pass that finds room under the claim cap takes its place
// under the cap again before the backlog is claimed from, so the claims
// in use never pass the cap.
func TestResumedRunCountsBeforeTheBacklogIsClaimed(t *testing.T) {
	l := &resumable{missedWake: missedWake{versioned: versioned{version: 1}}, resumed: map[string]bool{}}
	s := New(l, nil, nil)
	s.SetMaxActive(1) // two claims: one slot and the margin
	ctx := context.Background()
	s.reconcileAll(ctx) // the first pass, on an empty ledger
	held0, held1 := RunRef{Tenant: "t", RunID: "held0"}, RunRef{Tenant: "t", RunID: "held1"}
	a0, a1, a2 := RunRef{Tenant: "t", RunID: "a0"}, RunRef{Tenant: "t", RunID: "a1"}, RunRef{Tenant: "t", RunID: "a2"}
	l.setRuns(held0, held1, a0, a1, a2)
	s.reconcileAll(ctx)
	s.reconcileSome(ctx, nil) // the held runs are idle: a0 and a1 are claimed past them
	if len(s.claimed) != 4 || !s.claimed[a0] || !s.claimed[a1] || s.claimed[a2] {
		t.Fatalf("claimed %v, want the held runs, a0 and a1", s.claimed)
	}
	s.drop(ctx, a0) // a claim goes: room for one
	l.mu.Lock()
	l.resumed["held0"] = true
	l.version++
	l.mu.Unlock()
	s.markDirty(held0)
	s.reconcileSome(ctx, nil)
	if in, limit := s.claimsInUse(), s.claimCap(); in > limit || s.claimed[a2] {
		t.Fatalf("%d claims in use, cap %d (a2 claimed: %v; claimed %v, idle %v)", in, limit, s.claimed[a2], s.claimed, s.idle)
	}
}

// TestIdleClaimsDoNotCountForFairness: runs claimed but idle (waiting for
// a person) do not count for their tenant when the backlog is shared out:
// a tenant whose claimed runs are all held gets the next claim before one
// with a run that is running.
func TestIdleClaimsDoNotCountForFairness(t *testing.T) {
	l := &resumable{missedWake: missedWake{versioned: versioned{version: 1}}, resumed: map[string]bool{}}
	s := New(l, nil, nil)
	s.SetMaxActive(1) // two claims: one slot and the margin
	ctx := context.Background()
	s.reconcileAll(ctx)
	x0, x1, x2 := RunRef{Tenant: "x", RunID: "held0"}, RunRef{Tenant: "x", RunID: "held1"}, RunRef{Tenant: "x", RunID: "x2"}
	y0, y1 := RunRef{Tenant: "y", RunID: "y0"}, RunRef{Tenant: "y", RunID: "y1"}
	l.setRuns(x0, y0, x1, y1, x2)
	s.reconcileAll(ctx) // x's first run and y's first
	if !s.claimed[x0] || !s.claimed[y0] || len(s.claimed) != 2 {
		t.Fatalf("claimed %v, want each tenant's first run", s.claimed)
	}
	s.reconcileSome(ctx, nil) // x0 is idle: one more claim, x's second (first listed of equals)
	if !s.claimed[x1] || len(s.claimed) != 3 {
		t.Fatalf("claimed %v, want x's second run too", s.claimed)
	}
	s.reconcileSome(ctx, nil) // x1 is idle too: x has nothing running, y has y0
	if !s.claimed[x2] || s.claimed[y1] {
		t.Fatalf("claimed %v: x, whose claimed runs are all held, waits behind y", s.claimed)
	}
}
