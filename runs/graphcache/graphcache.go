// Package graphcache keeps the graphs of recent run submissions by their
// wire bytes: decoded (a decoded graph is immutable; every run submitted
// with the same bytes shares it) and, once admission's verifier accepted
// it, that result. Verification is a function of the graph for one
// backend: the graph-local registry is built from the graph alone, the
// verifier counts work rather than time, and a backend always verifies
// with the same function. So a graph accepted once is accepted again and
// is not verified again. A rejection or a verifier error is not kept. The
// cache is bounded by the bytes of the graphs it holds, dropping
// everything when full.
//
// The package imports graph and verifier, nothing of package runs.
package graphcache

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/verifier"
)

// VerifyFunc verifies a graph over its graph-local worker registry.
type VerifyFunc = func(ctx context.Context, g *graph.GraphSpec, reg verifier.Registry) (verifier.Result, error)

// Cache is a cache of decoded and verified graphs; its zero value is
// empty and ready. It is safe for concurrent use.
type Cache struct {
	mu   sync.Mutex
	m    map[string]*cachedGraph
	size int
}

type cachedGraph struct {
	g        *graph.GraphSpec
	verified *verifier.Result
}

// Bounds of the cache: a graph larger than MaxGraph is not kept; all kept
// graphs hold at most MaxBytes of wire bytes.
const (
	MaxGraph = 1 << 20
	MaxBytes = 8 << 20
)

func (c *Cache) entry(raw json.RawMessage) *cachedGraph {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[string(raw)]
}

// Decode decodes a submission's graph, or returns the one decoded from
// the same bytes before.
func (c *Cache) Decode(raw json.RawMessage) (*graph.GraphSpec, error) {
	if e := c.entry(raw); e != nil {
		return e.g, nil
	}
	g, err := graph.Decode(raw)
	if err != nil || len(raw) > MaxGraph {
		return g, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.size+len(raw) > MaxBytes {
		c.m, c.size = map[string]*cachedGraph{}, 0
	}
	if _, ok := c.m[string(raw)]; !ok {
		c.m[string(raw)] = &cachedGraph{g: g}
		c.size += len(raw)
	}
	return g, nil
}

// Verify is verify for the graph decoded from raw: a graph this cache
// decoded that was accepted before is accepted without verifying it
// again.
func (c *Cache) Verify(raw json.RawMessage, verify VerifyFunc) VerifyFunc {
	return func(ctx context.Context, g *graph.GraphSpec, reg verifier.Registry) (verifier.Result, error) {
		e := c.entry(raw)
		if e != nil && e.g == g {
			c.mu.Lock()
			res := e.verified
			c.mu.Unlock()
			if res != nil {
				return *res, nil
			}
		}
		res, err := verify(ctx, g, reg)
		if err == nil && res.OK() && e != nil && e.g == g {
			c.mu.Lock()
			e.verified = &res
			c.mu.Unlock()
		}
		return res, err
	}
}
