package statecache

// Size is the record bytes the young generation holds.
func (c *Cache[T]) Size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}

// Len is the number of values cached.
func (c *Cache[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.young) + len(c.old)
}
