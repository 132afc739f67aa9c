package postgres

import "github.com/oecp/oecp/store"

var _ store.ForeignWakes = (*Store)(nil)

// wakeForeign wakes the watchers for commits this store did not make: a
// notification from another store, or the listener's stand-in for
// notifications it may have missed (a moved snapshot, a reconnect).
func (s *Store) wakeForeign() {
	s.foreign.Add(1)
	s.foreignSignal.Wake()
	s.signal.Wake()
}

// ForeignWakes is the number of wake-ups for other stores' commits so
// far (store.ForeignWakes).
func (s *Store) ForeignWakes() uint64 { return s.foreign.Load() }

// ForeignChanged returns a channel closed by the next wake-up for another
// store's commit, or when the store closes (store.ForeignWakes).
func (s *Store) ForeignChanged() <-chan struct{} { return s.foreignSignal.Changed() }
