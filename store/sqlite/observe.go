package sqlite

import "github.com/oecp/oecp/store"

// SetObserver implements store.Observable.
func (s *Store) SetObserver(o store.Observer) { s.obs = o }
