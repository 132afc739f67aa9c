package sqlite

import (
	"time"

	"github.com/oecp/oecp/store"
)

// SetObserver implements store.Observable.
func (s *Store) SetObserver(o store.Observer) { s.obs = o }

// observe reports one write transaction that began at start.
func (s *Store) observe(start time.Time, failed bool) {
	if s.obs != nil {
		s.obs.Commit(time.Since(start), failed)
	}
}
