package reduce

import (
	"encoding/json"
	"sync"

	"github.com/oecp/oecp/graph"
)

// Memo carries what reductions derived from recorded JSON values (each
// distinct input's canonical form, each distinct output's parsed value)
// from one reduction to the next, so that a run reduced again and again
// parses each recorded value once. It only caches pure functions of the
// bytes, so a reduction with a memo returns what one without returns.
// What a reduction did not look up is dropped at the end of the next one.
// A Memo is safe for concurrent use; keep one per run.
type Memo struct {
	mu     sync.Mutex
	values cache[any]
	canons cache[string]
}

// cache maps bytes to what was derived from them: cur holds what the
// current reduction looked up, prev what the one before did.
type cache[T any] struct{ cur, prev map[string]T }

func (c *cache[T]) begin() { c.prev, c.cur = c.cur, map[string]T{} }

func (c *cache[T]) get(k string) (T, bool) {
	v, ok := c.cur[k]
	if !ok {
		if v, ok = c.prev[k]; ok {
			c.cur[k] = v
		}
	}
	return v, ok
}

// ReduceWith is Reduce with a memo (nil: none).
func ReduceWith(g *graph.GraphSpec, initialInput json.RawMessage, h History, m *Memo) (Result, error) {
	return reduce(g, initialInput, h, false, m)
}

// ReduceNativeWith is ReduceNative with a memo (nil: none).
func ReduceNativeWith(g *graph.GraphSpec, initialInput json.RawMessage, h History, m *Memo) (Result, error) {
	if len(h.Grants) > 0 {
		return Result{}, errf(ErrInconsistentHistory, "a native history has no retry grants")
	}
	return reduce(g, initialInput, h, true, m)
}

// begin starts a reduction: what the last one did not look up goes.
func (m *Memo) begin() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.values.begin()
	m.canons.begin()
	m.mu.Unlock()
}

// memoize returns c's entry for raw, deriving and keeping it on a miss.
func memoize[T any](m *Memo, c *cache[T], raw json.RawMessage, derive func(json.RawMessage) (T, error)) (T, error) {
	if m == nil {
		return derive(raw)
	}
	m.mu.Lock()
	v, ok := c.get(string(raw))
	m.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := derive(raw)
	if err != nil {
		return v, err
	}
	m.mu.Lock()
	c.cur[string(raw)] = v
	m.mu.Unlock()
	return v, nil
}

// value parses a recorded value (an output or a diagnostic); the result
// is shared and must not be modified (the reducer's values are
// copy-on-write).
func (m *Memo) value(raw json.RawMessage) (any, error) {
	var c *cache[any]
	if m != nil {
		c = &m.values
	}
	return memoize(m, c, raw, parseValue)
}

// canonicalOf is the canonical form of a recorded input.
func (m *Memo) canonicalOf(raw json.RawMessage) (string, error) {
	var c *cache[string]
	if m != nil {
		c = &m.canons
	}
	return memoize(m, c, raw, func(raw json.RawMessage) (string, error) {
		v, err := parseValue(raw)
		if err != nil {
			return "", err
		}
		b, err := canonical(v)
		return string(b), err
	})
}
