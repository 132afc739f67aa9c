package runs

// CheckStateCache turns the cache check every test runs on or off (a
// benchmark measures the cache, not the check).
func CheckStateCache(on bool) { checkStateCache = on }
