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
	perTenant := map[string]int{}
	perRun := map[RunRef]int{}
	s.mu.Lock()
	free := s.maxActive - s.running.n
	for ref, m := range s.running.byRun {
		perTenant[ref.Tenant] += len(m)
		perRun[ref] = len(m)
	}
	s.mu.Unlock()
	for ; free > 0; free-- {
		best := -1
		for i, w := range wants {
			if grants[i] == len(w.ds) {
				continue
			}
			if best < 0 || fairer(w.snap.Ref, wants[best].snap.Ref, perTenant, perRun) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		ref := wants[best].snap.Ref
		grants[best]++
		perTenant[ref.Tenant]++
		perRun[ref]++
	}
	return grants
}

// fairer reports whether run a should get the next slot before run b.
func fairer(a, b RunRef, perTenant map[string]int, perRun map[RunRef]int) bool {
	if ta, tb := perTenant[a.Tenant], perTenant[b.Tenant]; ta != tb {
		return ta < tb
	}
	return perRun[a] < perRun[b]
}
