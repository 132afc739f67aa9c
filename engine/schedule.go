package engine

// share decides how many of each want's dispatches start now. Without a
// bound every dispatch starts. With one, the free slots (the bound minus
// the executions running) are handed out one at a time: to the tenant
// with the fewest executions (running plus granted in this round), and
// within it to the run with the fewest, ties going to the earlier want
// (the ledger lists runs oldest first). So a tenant with many runs cannot
// starve one with few, and within a tenant a wide run cannot starve a
// narrow one. Dispatches that get no slot are recomputed by the next
// reconcile, which the commits of the slots' settlements trigger.
func (s *Supervisor) share(wants []want) []int {
	grants := make([]int, len(wants))
	if s.maxActive <= 0 {
		for i, w := range wants {
			grants[i] = len(w.ds)
		}
		return grants
	}
	s.mu.Lock()
	free := s.maxActive - s.running.n
	s.mu.Unlock()
	if free <= 0 {
		return grants
	}
	c := countsOf(wants)
	s.mu.Lock()
	free = s.maxActive - s.running.n
	for ref, m := range s.running.byRun {
		if t, ok := c.tenants[ref.Tenant]; ok {
			c.perTenant[t] += len(m)
		}
		if r, ok := c.runs[ref]; ok {
			c.perRun[r] = len(m)
		}
	}
	s.mu.Unlock()
	for ; free > 0; free-- {
		best := -1
		for i, w := range wants {
			if grants[i] == len(w.ds) {
				continue
			}
			if best < 0 || c.fairer(i, best) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		grants[best]++
		c.perTenant[c.tenantOf[best]]++
		c.perRun[c.runOf[best]]++
	}
	return grants
}

// shareCounts are the executions (running plus granted) of the wants'
// tenants and runs, numbered so that a comparison reads slices, not maps.
type shareCounts struct {
	tenants           map[string]int
	runs              map[RunRef]int
	tenantOf, runOf   []int // by want
	perTenant, perRun []int
}

func countsOf(wants []want) *shareCounts {
	c := &shareCounts{tenants: map[string]int{}, runs: map[RunRef]int{},
		tenantOf: make([]int, len(wants)), runOf: make([]int, len(wants))}
	for i, w := range wants {
		ref := w.snap.Ref
		t, ok := c.tenants[ref.Tenant]
		if !ok {
			t = len(c.perTenant)
			c.tenants[ref.Tenant] = t
			c.perTenant = append(c.perTenant, 0)
		}
		r, ok := c.runs[ref]
		if !ok {
			r = len(c.perRun)
			c.runs[ref] = r
			c.perRun = append(c.perRun, 0)
		}
		c.tenantOf[i], c.runOf[i] = t, r
	}
	return c
}

// fairer reports whether want a's run should get the next slot before
// want b's.
func (c *shareCounts) fairer(a, b int) bool {
	if ta, tb := c.perTenant[c.tenantOf[a]], c.perTenant[c.tenantOf[b]]; ta != tb {
		return ta < tb
	}
	return c.perRun[c.runOf[a]] < c.perRun[c.runOf[b]]
}
