package postgres

import "github.com/oecp/oecp/store"

// SetObserver implements store.Observable. It must be called before the
// store is used by more than one goroutine.
func (s *Store) SetObserver(o store.Observer) { s.obs = o }

// observeTakeover reports a lease acquired from another owner.
func (s *Store) observeTakeover() {
	if s.obs != nil {
		s.obs.LeaseTakenOver()
	}
}
