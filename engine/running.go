package engine

// runningSet is the executions this process runs, grouped by run, so
// that what a reconcile pass asks about one run (how many it runs, which)
// costs the same however many runs are running. Guarded by the
// supervisor's mu.
type runningSet struct {
	byRun map[RunRef]map[uint64]*execHandle
	n     int
}

func (r *runningSet) add(k runExec, h *execHandle) {
	if r.byRun == nil {
		r.byRun = map[RunRef]map[uint64]*execHandle{}
	}
	m := r.byRun[k.ref]
	if m == nil {
		m = map[uint64]*execHandle{}
		r.byRun[k.ref] = m
	}
	if _, ok := m[k.exec]; !ok {
		r.n++
	}
	m[k.exec] = h
}

func (r *runningSet) remove(k runExec) {
	m := r.byRun[k.ref]
	if _, ok := m[k.exec]; !ok {
		return
	}
	delete(m, k.exec)
	r.n--
	if len(m) == 0 {
		delete(r.byRun, k.ref)
	}
}

func (r *runningSet) get(k runExec) (*execHandle, bool) {
	h, ok := r.byRun[k.ref][k.exec]
	return h, ok
}

// of is the run's executions (not to be changed).
func (r *runningSet) of(ref RunRef) map[uint64]*execHandle { return r.byRun[ref] }

// cancelAll cancels every execution of the runs all selects.
func (r *runningSet) cancelAll(all func(RunRef) bool) {
	for ref, m := range r.byRun {
		if all(ref) {
			for _, h := range m {
				h.cancel()
			}
		}
	}
}
