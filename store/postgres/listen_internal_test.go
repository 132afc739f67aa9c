package postgres

import (
	"testing"
	"time"
)

// TestNotifiedWakesForOtherStoresOnly: a store's own commit and its own
// lease release wake nothing (a release of each finished run must not
// look like another replica's commit, which costs a full reconcile pass);
// another store's commit or release wakes the watchers, and a release,
// in either payload form, forgets the holder remembered for the lease.
func TestNotifiedWakesForOtherStoresOnly(t *testing.T) {
	s := &Store{id: newID()}
	other := newID()
	far := time.Now().Add(time.Hour)
	for _, c := range []struct {
		name    string
		payload string
		wakes   bool
		forgets bool
	}{
		{"own commit", s.id + " 17", false, false},
		{"own release", releasedPrefix + s.id + " run:t/r", false, false},
		{"another's commit", other + " 18", true, false},
		{"another's release", releasedPrefix + other + " run:t/r", true, true},
		{"a release of an earlier version", releasedPrefix + "run:t/r", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.held.set("run:t/r", far)
			before := s.ForeignWakes()
			s.notified(c.payload)
			if woke := s.ForeignWakes() != before; woke != c.wakes {
				t.Errorf("woke: %v, want %v", woke, c.wakes)
			}
			if _, held := s.held.get("run:t/r"); held == c.forgets {
				t.Errorf("holder still remembered: %v, want %v", held, !c.forgets)
			}
		})
	}
}
