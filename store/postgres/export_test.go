package postgres

// BroadcastChannel is the NOTIFY channel s listens on.
func BroadcastChannel(s *Store) string { return s.channel }

// HalfReceived counts the broadcast messages s holds some parts of.
func HalfReceived(s *Store) int {
	s.bc.mu.Lock()
	defer s.bc.mu.Unlock()
	return len(s.bc.parts)
}
