package store

import (
	"context"
	"time"
)

// Observer sees a store's commits and lease takeovers (metrics). Its
// methods are called on the commit path, after the store's locks are
// released or while its writer lock is held: they must not block or call
// the store.
type Observer interface {
	// Commit is one read-write transaction that wrote: how long it took
	// from begin to commit, and whether the store failed it (begin or
	// commit failed). A transaction its callback abandoned with an error
	// is not a commit and is not reported.
	Commit(d time.Duration, failed bool)
	// LeaseTakenOver is one lease acquired from another owner.
	LeaseTakenOver()
}

// Observable is the part of a Store that reports to an Observer.
// SetObserver must be called before the store is used by more than one
// goroutine.
type Observable interface {
	SetObserver(o Observer)
}

// SetObserver implements Observable.
func (m *memory) SetObserver(o Observer) { m.obs = o }

// ReportCommit tells o (nil: nobody) of one write transaction that began
// at start and committed, or failed to.
func ReportCommit(o Observer, start time.Time, failed bool) {
	if o != nil {
		o.Commit(time.Since(start), failed)
	}
}

// Ping implements Pinger: the memory store can serve until it is closed,
// which an empty read tells.
func (m *memory) Ping(ctx context.Context) error {
	return m.View(ctx, func(ReadTx) error { return nil })
}
