package sandbox

import "context"

// A root server keeps network namespaces made and connected ahead of any
// run (spares), so that a run's first execution enters a configured one
// instead of waiting for pasta. A spare is given to exactly one run, which
// then owns it as it owns the namespaces it makes itself; no agent ran in
// it before, and every spare is connected with the same allowed ports, so
// taking one changes nothing of what an agent can reach.

// KeepSpares keeps n spare network namespaces ready until ctx ends, making
// another each time one is taken, and ends the spares left when it
// returns. It does nothing where runs do not get namespaces of their own
// (an unconfined host, a server that is not root, no nsenter).
func (h *Host) KeepSpares(ctx context.Context, n int) {
	if h == nil || h.cfg.Unconfined || !h.root || h.nsenter == "" || n <= 0 {
		return
	}
	h.mu.Lock()
	h.spareWant = n
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		left := h.spares
		h.spares, h.spareWant = nil, 0
		h.mu.Unlock()
		for _, s := range left {
			s.close()
		}
	}()
	for {
		for h.spareShort() && ctx.Err() == nil {
			s, err := h.newNetwork()
			if err != nil {
				// The next take asks again; until then runs make their own.
				h.log.Warn("sandbox: making a spare network namespace", "err", err)
				break
			}
			if !h.addSpare(s) {
				s.close()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-h.spareTaken:
		}
	}
}

// spareShort reports whether fewer spares are ready than wanted.
func (h *Host) spareShort() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.spares) < h.spareWant
}

// addSpare keeps s as a spare, or reports false when none is wanted any
// more (KeepSpares is ending).
func (h *Host) addSpare(s *runNetwork) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.spares) >= h.spareWant {
		return false
	}
	h.spares = append(h.spares, s)
	return true
}

// takeSpareLocked removes a spare for a run and asks KeepSpares for
// another; nil when none is ready. h.mu is held.
func (h *Host) takeSpareLocked() *runNetwork {
	if len(h.spares) == 0 {
		return nil
	}
	s := h.spares[len(h.spares)-1]
	h.spares = h.spares[:len(h.spares)-1]
	select {
	case h.spareTaken <- struct{}{}:
	default:
	}
	return s
}
