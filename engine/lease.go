package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Claims that expire. When several processes supervise one shared ledger,
// a claim lasts a TTL unless renewed: the supervisor renews its claims
// every third of the TTL, and a process that stops renewing (it died, or
// lost the database) loses its runs to another process once the TTL has
// passed. The supervisor also rescans the running runs on every renewal
// tick, so a run whose claim lapsed is taken over within a TTL and a tick
// even when nothing commits. A claim it learns it lost (taken over by
// another process) stops that run's workers; the ledger's fence already
// rejects their writes. When renewals fail for a whole TTL, every claim
// may be another's by now, so every worker stops and every run is claimed
// again (or left to its new owner). A run that stops running is released,
// and so is every claim when the supervisor stops, so that another
// process can take the runs over at once.

// LeaseKeeper is the part of a Ledger that keeps claims that expire.
type LeaseKeeper interface {
	// ClaimTTL is how long a claim lasts unless renewed (0: claims do not
	// expire; Renew and Release are then never called).
	ClaimTTL() time.Duration
	// Renew extends every claim this supervisor holds and returns the runs
	// whose claim it no longer holds.
	Renew(ctx context.Context) (lost []RunRef, err error)
	// Release gives up the claim of a run.
	Release(ctx context.Context, ref RunRef) error
}

// ErrClaimedElsewhere: Claim found the run supervised by another live
// process. The supervisor leaves the run alone until that claim lapses.
var ErrClaimedElsewhere = errors.New("engine: run is supervised by another process")

// ErrClaimLost: Release found the claim taken over by another process (a
// write refused by its fence made the supervisor drop the run before a
// renewal told it the claim was lost).
var ErrClaimLost = errors.New("engine: the run's claim was taken over by another process")

// claimKeeping is the supervisor's side of expiring claims. lost and
// lostAll are guarded by the supervisor's mu; rescan wakes the reconcile
// loop.
type claimKeeping struct {
	lost    map[RunRef]bool
	lostAll bool
	rescan  chan struct{}
}

// keeper is the ledger's LeaseKeeper and its TTL (0: claims do not
// expire).
func (s *Supervisor) keeper() (LeaseKeeper, time.Duration) {
	return s.ledger, s.ledger.ClaimTTL()
}

// keepClaims renews the claims until ctx ends; the returned channel is
// closed when it has stopped.
func (s *Supervisor) keepClaims(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	lk, ttl := s.keeper()
	if ttl <= 0 {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		renewed := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			start := time.Now()
			lost, err := lk.Renew(ctx)
			switch {
			case err == nil:
				renewed = start
				s.loseClaims(lost, false)
			case ctx.Err() != nil:
				return
			default:
				s.errs.Log(s.log, slog.LevelWarn, "", "engine: renew run claims", "err", err)
				if time.Since(renewed) >= ttl {
					s.loseClaims(nil, true)
				}
			}
			select {
			case s.keep.rescan <- struct{}{}:
			default:
			}
		}
	}()
	return done
}

// loseClaims stops the workers of runs whose claim is lost (every run's,
// with all) and leaves the claims for reconcileAll to drop.
func (s *Supervisor) loseClaims(refs []RunRef, all bool) {
	if len(refs) == 0 && !all {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lost := map[RunRef]bool{}
	for _, ref := range refs {
		lost[ref] = true
		s.keep.lost[ref] = true
		s.log.Warn("engine: lost the claim of a run; its workers stop", "run", ref.RunID, "tenant", ref.Tenant)
	}
	if all {
		s.keep.lostAll = true
		s.errs.Log(s.log, slog.LevelWarn, "", "engine: claims not renewed for a whole TTL; every worker stops")
	}
	s.running.cancelAll(func(ref RunRef) bool { return all || lost[ref] })
}

// dropLost forgets the claims loseClaims reported lost, and the readings
// taken under them; the runs are claimed again by the next reconcile, or
// left to their new owner. It returns the runs it dropped, or all when
// it dropped every claim.
func (s *Supervisor) dropLost() (lost []RunRef, all bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if all = s.keep.lostAll; all {
		clear(s.claimed)
		clear(s.seen)
		clear(s.idle)
		s.keep.lostAll = false
	}
	for ref := range s.keep.lost {
		delete(s.claimed, ref)
		delete(s.seen, ref)
		delete(s.idle, ref)
		lost = append(lost, ref)
	}
	clear(s.keep.lost)
	return lost, all
}

// unclaim forgets the claim of a run that is no longer running and
// releases it.
func (s *Supervisor) unclaim(ctx context.Context, ref RunRef) {
	delete(s.claimed, ref)
	delete(s.idle, ref)
	if lk, ttl := s.keeper(); ttl > 0 {
		err := lk.Release(ctx, ref)
		switch {
		case errors.Is(err, ErrClaimLost):
			s.log.Warn("engine: lost the claim of a run; its workers stop", "run", ref.RunID, "tenant", ref.Tenant)
		case err != nil && ctx.Err() == nil:
			s.log.Debug("engine: release run claim", "run", ref.RunID, "err", err)
		}
	}
}

// releaseClaims releases every claim (the supervisor is stopping).
func (s *Supervisor) releaseClaims(ctx context.Context) {
	for ref := range s.claimed {
		s.unclaim(ctx, ref)
	}
}
