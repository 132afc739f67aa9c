package workspace

import (
	"context"
	"sync"
)

// Gate is a run's workspace lock: a writer (an agent step, delivery)
// holds it alone, verifiers share it. Waiting honours ctx. A waiting
// writer does not hold back later verifiers: the graph's own rules keep
// writers from running next to other executions, so the gate only has to
// be safe, not fair.
type Gate struct {
	mu      sync.Mutex
	readers int
	writing bool
	changed chan struct{} // closed and replaced at every release
}

func newGate() *Gate { return &Gate{changed: make(chan struct{})} }

// Acquire waits until the gate admits a writer (write) or a reader, and
// returns the function that releases it; it fails only when ctx ends
// first.
func (g *Gate) Acquire(ctx context.Context, write bool) (release func(), err error) {
	for {
		g.mu.Lock()
		if !g.writing && (!write || g.readers == 0) {
			if write {
				g.writing = true
			} else {
				g.readers++
			}
			g.mu.Unlock()
			return sync.OnceFunc(func() { g.release(write) }), nil
		}
		wait := g.changed
		g.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (g *Gate) release(write bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if write {
		g.writing = false
	} else {
		g.readers--
	}
	close(g.changed)
	g.changed = make(chan struct{})
}
