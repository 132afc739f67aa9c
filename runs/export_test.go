package runs

// CheckStateCache turns the cache check every test runs on or off (a
// benchmark measures the cache, not the check).
func CheckStateCache(on bool) { checkStateCache = on }

// WorkspaceMark is the mark a reading of a run takes as it begins.
func WorkspaceMark(b *Backend) uint64 { return b.prep.mark() }

// StaleWorkspaceReady calls workspaceReady for the run of tenant runID as
// a reading of the run that began at mark would, and waits for the
// preparation it started, if any, to end. It reports whether the run's
// workspace state is still kept after.
func StaleWorkspaceReady(b *Backend, tenant, runID string, src Source, started bool, mark uint64) (kept bool) {
	k := runKey{b.TenantKey(tenant), runID}
	b.workspaceReady(k, src, started, 0, mark)
	b.prep.wg.Wait()
	b.prep.mu.Lock()
	defer b.prep.mu.Unlock()
	_, kept = b.prep.state[k]
	return kept
}

// ArmedCalls counts the calls that watch and logs readers armed with
// their runs' signals and that are still kept with them: neither fired
// by a write of their run nor taken back.
func ArmedCalls(b *Backend) int {
	b.wake.mu.Lock()
	defer b.wake.mu.Unlock()
	n := 0
	for _, e := range b.wake.m {
		n += len(e.calls)
	}
	return n
}

// RemoteArmedCalls counts the calls armed with other replicas' next
// commit (on a shared store) that have not fired.
func RemoteArmedCalls(b *Backend) int {
	b.wake.mu.Lock()
	defer b.wake.mu.Unlock()
	return len(b.wake.remote.calls)
}
