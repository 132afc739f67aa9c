package engine

import (
	"context"
	"errors"
)

// A supervisor claims only the runs it can run. Where the executions
// running at once are bounded it claims at most its execution slots plus a
// small margin (claimCap), whether its claims expire (several processes
// share one ledger) or not (one process owns it): so the runs of a replica
// that died are shared among the survivors instead of going, all of them,
// to the first one to notice, and what a supervisor holds (its claims, the
// runs it has read, the workspaces prepared ahead) is as large as its
// slots however deep the queue is. A claimed run that waits for a person
// (Supervisor.idle) keeps its claim but not its place under the cap, so
// that runs suspended or held for a retry grant cannot keep the backlog
// from ever being claimed. The running runs it lists but does not claim
// wait in a backlog, per tenant in listing order; when a claimed run goes
// (it finished, or its claim was lost) the next pass claims from the
// backlog, fairly across tenants (fewest claimed runs that are not idle
// first), without listing every run again; the runs it already holds are
// read first, so that one that stopped being idle counts before it
// claims. A full pass rebuilds the backlog. Where the
// executions are unbounded every running run is claimed, and so is every
// running run a supervisor whose claims do not expire finds in its first
// full pass: it owns the ledger, so the executions a crash left active are
// its own to settle, and their processes to kill, at once rather than when
// their runs' turn in the backlog comes.

// claimMarginDivisor sets the margin of claims beyond the execution
// slots: a quarter of the slots, at least one, so that a run is read and
// ready (its workspace prepared) when a slot frees.
const claimMarginDivisor = 4

// claimsInUse is how many claimed runs count against the claim cap: all
// of them but the idle ones.
func (s *Supervisor) claimsInUse() int { return len(s.claimed) - len(s.idle) }

// claimCap is how many runs the supervisor claims at most (0: no bound).
func (s *Supervisor) claimCap() int {
	if s.maxActive <= 0 {
		return 0
	}
	if _, ttl := s.keeper(); ttl <= 0 && !s.recovered {
		return 0
	}
	return s.maxActive + max(1, s.maxActive/claimMarginDivisor)
}

// backlog holds running runs not claimed because the claim cap was
// reached, per tenant, oldest first. Only the reconcile loop uses it.
type backlog struct {
	tenants map[string][]RunRef
	order   []string // tenants in the order they first came
	in      map[RunRef]bool
}

func (b *backlog) push(ref RunRef) {
	if b.in[ref] {
		return
	}
	if b.in == nil {
		b.in, b.tenants = map[RunRef]bool{}, map[string][]RunRef{}
	}
	if _, ok := b.tenants[ref.Tenant]; !ok {
		b.order = append(b.order, ref.Tenant)
	}
	b.in[ref] = true
	b.tenants[ref.Tenant] = append(b.tenants[ref.Tenant], ref)
}

func (b *backlog) len() int { return len(b.in) }

// take removes and returns up to n runs, one at a time from the tenant
// with the fewest runs (claimed, per claimed, plus taken), the tenant
// that came first among equals.
func (b *backlog) take(n int, claimed map[string]int) []RunRef {
	var out []RunRef
	for ; n > 0 && b.len() > 0; n-- {
		best := -1
		for i, t := range b.order {
			if len(b.tenants[t]) == 0 {
				continue
			}
			if best < 0 || claimed[t] < claimed[b.order[best]] {
				best = i
			}
		}
		t := b.order[best]
		ref := b.tenants[t][0]
		b.tenants[t] = b.tenants[t][1:]
		if len(b.tenants[t]) == 0 {
			delete(b.tenants, t)
			b.order = append(b.order[:best:best], b.order[best+1:]...)
		}
		delete(b.in, ref)
		claimed[t]++
		out = append(out, ref)
	}
	return out
}

// claimUpTo claims runs among candidates (and the backlog) while the
// claim cap allows, and returns the runs it claimed; those left wait in
// the backlog. A run another process holds leaves the backlog until a
// full pass lists it again. Without a cap it claims every candidate.
func (s *Supervisor) claimUpTo(ctx context.Context, candidates []RunRef, report func(string, RunRef, error)) (claimed []RunRef) {
	limit := s.claimCap()
	if limit == 0 {
		return s.claimAll(ctx, candidates, report)
	}
	for _, ref := range candidates {
		if !s.claimed[ref] {
			s.spread.push(ref)
		}
	}
	for s.spread.len() > 0 && s.claimsInUse() < limit && ctx.Err() == nil {
		perTenant := map[string]int{}
		for ref := range s.claimed {
			if !s.idle[ref] {
				perTenant[ref.Tenant]++
			}
		}
		next := s.spread.take(limit-s.claimsInUse(), perTenant)
		got := s.claimAll(ctx, next, report)
		claimed = append(claimed, got...)
		settled := len(got)
		for _, ref := range next {
			switch {
			case s.claimed[ref]:
			case s.heldElsewhere[ref]:
				settled++
			default:
				s.spread.push(ref) // it failed: the next pass tries again
			}
		}
		if settled == 0 {
			return claimed // every claim failed: the store cannot answer now
		}
	}
	return claimed
}

// resetSpread empties the backlog before a full pass lists every run.
func (s *Supervisor) resetSpread() {
	s.spread = backlog{}
	clear(s.heldElsewhere)
}

// freedClaim asks for another pass when a claim went while runs wait in
// the backlog: the pass claims one of them.
func (s *Supervisor) freedClaim() {
	if s.spread.len() == 0 {
		return
	}
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// noteClaim records a claim another process holds.
func (s *Supervisor) noteClaim(ref RunRef, err error) {
	if errors.Is(err, ErrClaimedElsewhere) {
		s.heldElsewhere[ref] = true
	}
}
