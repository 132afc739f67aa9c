// Package statecache keeps decoded records by key, with the exact bytes
// each was decoded from or encoded to, so that a write does not decode
// the record the previous write left. A value is taken from it only when
// the record read holds those same bytes: a write by any other writer
// (another process, a rolled-back transaction, another store) leaves
// other bytes, and equal bytes decode alike. The cache hands out copies
// and keeps copies of what it is given (its clone function makes them).
//
// It keeps the records in use, not every one: a record's writes come
// close together, while many records go unwritten for a long time, and
// their decoded values would only grow the heap the garbage collector
// walks. So it holds two generations, each bounded by the record bytes it
// holds: entries go to the young one, a hit in the old one moves the
// entry to the young one, and a full young one becomes the old one
// (dropping the old).
//
// The package imports nothing of the module.
package statecache

import (
	"bytes"
	"sync"
)

// MaxBytes bounds the record bytes of one generation; a record over
// MaxBytes/64 is not kept (it would crowd out the others).
const MaxBytes = 16 << 20

// Cache is a cache of decoded records of type T. It is safe for
// concurrent use.
type Cache[T any] struct {
	clone func(T) T

	mu         sync.Mutex
	young, old map[string]entry[T]
	size       int // the record bytes in young
}

type entry[T any] struct {
	data []byte
	v    T
}

// New returns an empty cache that copies values with clone.
func New[T any](clone func(T) T) *Cache[T] {
	return &Cache[T]{clone: clone}
}

// Get returns a copy of the value cached for key when data is the bytes
// it was cached with.
func (c *Cache[T]) Get(key string, data []byte) (T, bool) {
	c.mu.Lock()
	e, ok := c.young[key]
	if !ok {
		if e, ok = c.old[key]; ok {
			delete(c.old, key)
			c.keepLocked(key, e)
		}
	}
	c.mu.Unlock()
	if !ok || !bytes.Equal(e.data, data) {
		var zero T
		return zero, false
	}
	return c.clone(e.v), true
}

// Put keeps a copy of v as the decoding of data, which the caller no
// longer changes.
func (c *Cache[T]) Put(key string, data []byte, v T) {
	v = c.clone(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.young[key]; ok {
		c.size -= len(old.data)
		delete(c.young, key)
	}
	delete(c.old, key)
	if len(data) > MaxBytes/64 {
		return
	}
	c.keepLocked(key, entry[T]{data: data, v: v})
}

// keepLocked adds e to the young generation, which becomes the old one
// first when e would overfill it. c.mu is held.
func (c *Cache[T]) keepLocked(key string, e entry[T]) {
	if c.young == nil || c.size+len(e.data) > MaxBytes {
		c.old, c.young, c.size = c.young, map[string]entry[T]{}, 0
	}
	c.young[key] = e
	c.size += len(e.data)
}
