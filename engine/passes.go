package engine

import (
	"context"
	"errors"
	"time"
)

// Reconcile passes. A full pass lists every running run (Ledger.Running)
// and reconciles each; an incremental pass reconciles only the runs that
// changed: those the ledger's change feed names (ChangeFeed) and those
// this supervisor wrote, settled or lost the claim of. Runs waiting for
// execution slots keep their last reading in a queue (waitQueue), so
// handing out the slots a settlement freed reads none of them. The work
// of an incremental pass therefore follows what changed, not how many
// runs are unfinished. Full passes run at the start, when the feed
// cannot say what changed (at most one per minFullPassGap, the rest
// coalesced), on each claim renewal tick (to take over runs whose claim
// lapsed elsewhere) and every safety-net interval, which catches a change
// a feed missed.

// ChangeFeed is the part of a Ledger that names the runs whose durable
// state may have changed.
type ChangeFeed interface {
	// Changes returns the runs that may have changed since the previous
	// call — a new run, and a run that stopped running, included. all
	// reports that the feed cannot tell (a commit it cannot attribute, an
	// overflow): a full pass is due. It is called only by the reconcile
	// loop, after Changed fired or a pass asked for another.
	Changes(ctx context.Context) (refs []RunRef, all bool, err error)
}

// TrailingFeed is an optional Ledger extension: a change feed that may
// name a run only after the commit that changed it was announced
// (Ledger.Changed fired before the feed holds the run). Named returns a
// channel closed once the feed names a run after the call, and the
// supervisor waits on it beside Changed, so that it never sleeps through
// a change it read too early. A feed that holds every run its commit
// announces (one that reads the store when asked) needs no such channel.
type TrailingFeed interface {
	Named() <-chan struct{}
}

// Full-pass rates.
const (
	// DefaultSafetyNet is how often a supervisor lists and reconciles
	// every running run anyway (SetSafetyNet).
	DefaultSafetyNet = 10 * time.Second
	// minFullPassGap bounds the rate of the full passes a change feed
	// asks for: at most one per gap; requests within it wait for its end
	// and are served by one pass.
	minFullPassGap = time.Second
)

// SetSafetyNet sets how often a full pass runs besides those the change
// feed asks for (d <= 0: DefaultSafetyNet). Call it before Run.
func (s *Supervisor) SetSafetyNet(d time.Duration) {
	if d <= 0 {
		d = DefaultSafetyNet
	}
	s.safetyNet = d
}

// passPlan is the reconcile loop's record of which pass is due.
type passPlan struct {
	full     bool      // the next pass is a full one
	asked    bool      // the feed asked for a full pass not run yet
	lastFull time.Time // when the last full pass started
}

// next runs the pass due, reports whether it failed, and returns the
// channel that fires when a full pass the feed asked for may run (nil:
// none waits).
func (s *Supervisor) next(ctx context.Context, p *passPlan) (failed bool, gap <-chan time.Time) {
	refs, all, err := s.ledger.Changes(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.logError("engine: read the ledger's changes", "err", err)
		}
		all, failed = true, true
	}
	p.asked = p.asked || all
	if p.asked && time.Since(p.lastFull) >= minFullPassGap {
		p.full = true
	}
	if p.full {
		p.full, p.asked, p.lastFull = false, false, time.Now()
		s.markDirty(refs...)
		if s.reconcileAll(ctx) {
			failed, p.full = true, true
		} else if !failed {
			s.ledgerAnswers() // a full pass read and wrote what it had to
		}
	} else if s.reconcileSome(ctx, refs) {
		failed = true
	}
	if p.asked {
		gap = time.After(minFullPassGap - time.Since(p.lastFull))
	}
	return failed, gap
}

// markDirty records runs to reconcile afresh in the next pass.
func (s *Supervisor) markDirty(refs ...RunRef) {
	if len(refs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ref := range refs {
		s.dirty[ref] = true
	}
}

// takeDirty returns the runs marked dirty and clears the mark.
func (s *Supervisor) takeDirty() map[RunRef]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dirty
	s.dirty = map[RunRef]bool{}
	return d
}

// passReport collects a pass's failures: a failed read or write for a
// reason other than the run having moved on marks the run dirty again, so
// the retry reconciles it.
type passReport struct {
	s      *Supervisor
	ctx    context.Context
	failed bool
}

func (r *passReport) report(msg string, ref RunRef, err error) {
	if err != nil && r.ctx.Err() == nil && !errors.Is(err, ErrStale) {
		r.failed = true
		r.s.logError(msg, "run", ref.RunID, "err", err)
		if ref != (RunRef{}) {
			r.s.markDirty(ref)
		}
	}
}

// reconcileAll reconciles every running run and reports whether a read or
// write failed for a reason other than the run having moved on.
func (s *Supervisor) reconcileAll(ctx context.Context) (failed bool) {
	rep := &passReport{s: s, ctx: ctx}
	runs, err := s.ledger.Running(ctx)
	if err != nil {
		rep.report("engine: list running runs", RunRef{}, err)
		return rep.failed
	}
	s.dropClaimsLost()
	if s.obs != nil {
		s.obs.RunsActive(len(runs))
	}
	live := make(map[RunRef]bool, len(runs))
	for _, ref := range runs {
		live[ref] = true
	}
	s.resetSpread()
	s.claimUpTo(ctx, runs, rep.report)
	dirty := s.takeDirty()
	var writes []write
	for _, ref := range runs {
		if !s.claimed[ref] {
			s.waiting.remove(ref)
			continue
		}
		if dirty[ref] {
			delete(s.seen, ref)
		}
		writes = s.reconcileInto(ctx, ref, writes, rep)
	}
	s.issue(ctx, writes, rep)
	// Workers of runs that are no longer running (finished, superseded,
	// force-stopped) are cancelled; their results will be rejected.
	s.mu.Lock()
	s.running.cancelAll(func(ref RunRef) bool { return !live[ref] })
	s.mu.Unlock()
	for ref := range s.claimed {
		if !live[ref] {
			s.drop(ctx, ref)
		}
	}
	s.recovered = s.recovered || !rep.failed
	return rep.failed
}

// reconcileSome reconciles the runs refs names and those marked dirty,
// and hands out free execution slots to the waiting runs.
func (s *Supervisor) reconcileSome(ctx context.Context, refs []RunRef) (failed bool) {
	rep := &passReport{s: s, ctx: ctx}
	s.dropClaimsLost()
	dirty := s.takeDirty()
	for _, ref := range refs {
		dirty[ref] = true
	}
	// The runs already claimed are read first: one that stopped waiting
	// for a person counts under the claim cap again before any other is
	// claimed. A run not claimed yet is claimed before it is read (every
	// write for it is fenced by the claim); one that turns out not to be
	// running is released again by reconcileInto.
	var unclaimed []RunRef
	var writes []write
	for ref := range dirty {
		if !s.claimed[ref] {
			unclaimed = append(unclaimed, ref)
			continue
		}
		delete(s.seen, ref)
		writes = s.reconcileInto(ctx, ref, writes, rep)
	}
	for _, ref := range s.claimUpTo(ctx, unclaimed, rep.report) {
		// Claimed now, from the candidates or the backlog (spread.go).
		delete(s.seen, ref)
		writes = s.reconcileInto(ctx, ref, writes, rep)
	}
	for _, ref := range unclaimed {
		if !s.claimed[ref] {
			s.waiting.remove(ref)
		}
	}
	if s.obs != nil {
		s.obs.RunsActive(len(s.claimed) + s.spread.len())
	}
	s.issue(ctx, writes, rep)
	return rep.failed
}

// reconcileInto reconciles one claimed run: its want (if it has one)
// joins the waiting queue, its write (if any) is appended to writes. A
// run that is no longer running is dropped.
func (s *Supervisor) reconcileInto(ctx context.Context, ref RunRef, writes []write, rep *passReport) []write {
	w, wr, err := s.reconcileCached(ctx, ref)
	if errors.Is(err, ErrStale) {
		s.drop(ctx, ref)
		return writes
	}
	rep.report("engine: reconcile", ref, err)
	if w != nil {
		s.waiting.put(*w)
	} else {
		s.waiting.remove(ref)
	}
	if wr != nil {
		writes = append(writes, *wr)
	}
	return writes
}

// issue adds the dispatches the free slots allow to writes and issues
// them all. Every run written is reconciled afresh by the next pass. A
// run granted slots leaves the waiting queue until it is read again: its
// dispatch's commit is a change (and a dispatch the gate refused leaves
// nothing to do until the gate opens, which is one too).
func (s *Supervisor) issue(ctx context.Context, writes []write, rep *passReport) {
	refs := make([]RunRef, 0, len(writes))
	for _, w := range writes {
		refs = append(refs, w.ref)
	}
	for _, e := range s.waiting.grant(s) {
		writes = append(writes, s.dispatch(e.want.snap, e.want.ds[:e.granted]))
		s.waiting.remove(e.want.snap.Ref)
	}
	for i, err := range runWrites(ctx, writes) {
		rep.report(writes[i].msg, writes[i].ref, err)
	}
	s.markDirty(refs...)
}

// drop forgets a run that is no longer running (or no longer ours): its
// workers are cancelled, its claim released, its reading and memos
// dropped.
func (s *Supervisor) drop(ctx context.Context, ref RunRef) {
	s.mu.Lock()
	s.running.cancelAll(func(r RunRef) bool { return r == ref })
	s.mu.Unlock()
	if s.claimed[ref] {
		s.unclaim(ctx, ref)
		s.freedClaim()
	}
	s.waiting.remove(ref)
	s.hostStarted(ref)
	delete(s.idle, ref)
	delete(s.seen, ref)
	delete(s.memos, ref)
	delete(s.counts, ref)
}

// dropClaimsLost forgets the claims lost elsewhere (dropLost); their runs
// leave the waiting queue and are claimed again by the next pass, or left
// to their new owner. Losing every claim asks for a full pass.
func (s *Supervisor) dropClaimsLost() {
	lost, all := s.dropLost()
	for _, ref := range lost {
		s.waiting.remove(ref)
	}
	if len(lost) > 0 || all {
		s.freedClaim()
	}
	s.markDirty(lost...)
	if all {
		s.waiting = waitQueue{}
		select {
		case s.keep.rescan <- struct{}{}:
		default:
		}
	}
}

// claimAll claims the runs not claimed yet, concurrently, and returns
// those it claimed.
func (s *Supervisor) claimAll(ctx context.Context, runs []RunRef, report func(string, RunRef, error)) (claimed []RunRef) {
	var claims []write
	for _, ref := range runs {
		if !s.claimed[ref] {
			claims = append(claims, write{ref: ref, msg: "engine: claim run", do: func(ctx context.Context) error { return s.ledger.Claim(ctx, ref) }})
		}
	}
	for i, err := range runWrites(ctx, claims) {
		s.noteClaim(claims[i].ref, err)
		switch {
		case err == nil:
			s.claimed[claims[i].ref] = true
			claimed = append(claimed, claims[i].ref)
		case !errors.Is(err, ErrClaimedElsewhere):
			report(claims[i].msg, claims[i].ref, err)
		}
	}
	return claimed
}

// reconcileCached is reconcile, skipped when the ledger says the run has
// not changed since a reading that acted on nothing (the run was waiting
// for its executions or for execution slots).
func (s *Supervisor) reconcileCached(ctx context.Context, ref RunRef) (*want, *write, error) {
	v, ok := s.ledger.(Versioner)
	if !ok {
		return s.reconcile(ctx, ref)
	}
	version := v.Version(ref)
	s.mu.Lock()
	mine := len(s.running.of(ref))
	_, held := s.hostHolds[ref] // a run waiting after a host fault is read afresh
	s.mu.Unlock()
	if held {
		delete(s.seen, ref)
		return s.reconcile(ctx, ref)
	}
	if r, hit := s.seen[ref]; hit && version != 0 && r.version == version && r.mine == mine {
		return r.want, nil, nil
	}
	w, wr, err := s.reconcile(ctx, ref)
	// A reading that decided a write is not kept: the write changes the
	// version when it commits, and must be decided again when it fails.
	if err == nil && wr == nil && version != 0 && v.Version(ref) == version {
		s.seen[ref] = reading{version: version, mine: mine, want: w}
	} else {
		delete(s.seen, ref)
	}
	return w, wr, err
}
