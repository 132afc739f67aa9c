package postgres_test

import (
	"sync"
	"testing"
	"time"

	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
)

// counting is a store.Observer that counts what it is told.
type counting struct {
	mu                sync.Mutex
	commits, failures int
	takeovers         int
}

func (c *counting) Commit(_ time.Duration, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commits++
	if failed {
		c.failures++
	}
}

func (c *counting) LeaseTakenOver() { c.mu.Lock(); c.takeovers++; c.mu.Unlock() }

// TestObserverSeesCommitsAndTakeovers: a transaction that wrote is one
// commit, a read-only one is none, and a lease acquired from another owner
// is one takeover.
func TestObserverSeesCommitsAndTakeovers(t *testing.T) {
	s := open(t, postgres.Options{LeaseTTL: time.Microsecond})
	obs := &counting{}
	s.SetObserver(obs)
	must(t, s.Update(ctx, func(tx store.Tx) error { _, err := tx.NextCounter("c"); return err }))
	must(t, s.View(ctx, func(tx store.ReadTx) error { _, err := tx.LastSeq(); return err }))
	_, err := s.AcquireLease(ctx, "l", "A")
	must(t, err)
	for {
		if _, err := s.AcquireLease(ctx, "l", "B"); err == nil {
			break
		}
		time.Sleep(time.Millisecond) // the one-microsecond lease lapses on the database clock
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.commits != 1 || obs.failures != 0 || obs.takeovers != 1 {
		t.Fatalf("commits %d failures %d takeovers %d", obs.commits, obs.failures, obs.takeovers)
	}
}
