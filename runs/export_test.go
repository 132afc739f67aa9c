package runs

// CheckStateCache turns the cache check every test runs on or off (a
// benchmark measures the cache, not the check).
func CheckStateCache(on bool) { checkStateCache = on }

// StaleWorkspaceReady calls workspaceReady for the run of tenant runID as
// a reading of the run taken before its last commit would, and waits for
// the preparation it started, if any, to end. It reports whether the
// run's workspace state is still kept after.
func StaleWorkspaceReady(b *Backend, tenant, runID string, src Source, started bool) (kept bool) {
	k := runKey{b.TenantKey(tenant), runID}
	b.workspaceReady(k, src, started, 0)
	b.prep.wg.Wait()
	b.prep.mu.Lock()
	defer b.prep.mu.Unlock()
	_, kept = b.prep.state[k]
	return kept
}
