package engine

import "container/list"

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
	var q waitQueue
	entries := make([]*waiting, len(wants))
	for i, w := range wants {
		entries[i] = q.push(w)
	}
	q.grant(s)
	for i, e := range entries {
		grants[i] = e.granted
	}
	return grants
}

// waitQueue holds the runs waiting for execution slots, so that handing
// out a free slot costs the same however many runs wait: per tenant, the
// waiting runs in the order they began to wait. The fairest run of a
// tenant is found by walking its list from the front to the first run
// with no execution running or granted: every run before it has one, and
// there are at most as many of those as the bound on executions. The
// zero value is empty. Only the reconcile loop uses it.
type waitQueue struct {
	byRun   map[RunRef]*waiting
	tenants map[string]*list.List // of *waiting, oldest first
	stamp   uint64
}

// waiting is one want in the queue, and the slots granted to it in the
// current round.
type waiting struct {
	want    want
	stamp   uint64
	granted int
	elem    *list.Element
}

// push appends w (not keyed by run) and returns its entry.
func (q *waitQueue) push(w want) *waiting {
	if q.tenants == nil {
		q.tenants = map[string]*list.List{}
	}
	t := w.snap.Ref.Tenant
	l := q.tenants[t]
	if l == nil {
		l = list.New()
		q.tenants[t] = l
	}
	q.stamp++
	e := &waiting{want: w, stamp: q.stamp}
	e.elem = l.PushBack(e)
	return e
}

// put makes w the run's want. A run that already waits keeps its place.
func (q *waitQueue) put(w want) {
	ref := w.snap.Ref
	if e, ok := q.byRun[ref]; ok {
		e.want = w
		return
	}
	if q.byRun == nil {
		q.byRun = map[RunRef]*waiting{}
	}
	q.byRun[ref] = q.push(w)
}

// remove takes the run out of the queue.
func (q *waitQueue) remove(ref RunRef) {
	e, ok := q.byRun[ref]
	if !ok {
		return
	}
	delete(q.byRun, ref)
	l := q.tenants[ref.Tenant]
	l.Remove(e.elem)
	if l.Len() == 0 {
		delete(q.tenants, ref.Tenant)
	}
}

// len is the number of runs waiting.
func (q *waitQueue) len() int { return len(q.byRun) }

// grant hands out the supervisor's free slots to the queued wants, fairly
// (see share), and returns the entries granted any, each with its count
// in granted. Every entry's granted is 0 before the call.
func (q *waitQueue) grant(s *Supervisor) []*waiting {
	var out []*waiting
	if s.maxActive <= 0 {
		for _, l := range q.tenants {
			for el := l.Front(); el != nil; el = el.Next() {
				e := el.Value.(*waiting)
				if e.granted = len(e.want.ds); e.granted > 0 {
					out = append(out, e)
				}
			}
		}
		return out
	}
	s.mu.Lock()
	free := s.maxActive - s.running.n
	perTenant := map[string]int{}
	perRun := map[RunRef]int{}
	if free > 0 {
		for ref, m := range s.running.byRun {
			if _, ok := q.tenants[ref.Tenant]; ok {
				perTenant[ref.Tenant] += len(m)
				perRun[ref] = len(m)
			}
		}
	}
	s.mu.Unlock()
	for ; free > 0; free-- {
		best, bestTenant := (*waiting)(nil), 0
		for t, l := range q.tenants {
			e := fairestOf(l, perRun)
			if e == nil {
				continue
			}
			tc := perTenant[t]
			if best == nil || tc < bestTenant || (tc == bestTenant && before(e, best, perRun)) {
				best, bestTenant = e, tc
			}
		}
		if best == nil {
			break
		}
		if best.granted == 0 {
			out = append(out, best)
		}
		ref := best.want.snap.Ref
		best.granted++
		perTenant[ref.Tenant]++
		perRun[ref]++
	}
	return out
}

// fairestOf is the entry of one tenant's list with slots left to grant
// whose run has the fewest executions (running plus granted), the oldest
// among equals; nil when none has slots left.
func fairestOf(l *list.List, perRun map[RunRef]int) *waiting {
	var best *waiting
	for el := l.Front(); el != nil; el = el.Next() {
		e := el.Value.(*waiting)
		if e.granted == len(e.want.ds) {
			continue
		}
		if best == nil || before(e, best, perRun) {
			best = e
		}
		if perRun[e.want.snap.Ref] == 0 {
			break // no later entry has fewer, and an equal one is younger
		}
	}
	return best
}

// before reports whether entry a's run gets a slot before entry b's run
// of the same tenant count: fewer executions first, then the older.
func before(a, b *waiting, perRun map[RunRef]int) bool {
	ra, rb := perRun[a.want.snap.Ref], perRun[b.want.snap.Ref]
	if ra != rb {
		return ra < rb
	}
	return a.stamp < b.stamp
}
