package harness

import (
	"context"
	"errors"
	"sync"
)

// errSessionLost is a node_instance session that ended unclean before.
var errSessionLost = errors.New("the node instance's harness session was lost")

// sessionKey identifies a node_instance session: the run and the node
// instance, which survives loop revisits.
type sessionKey struct{ run, instance string }

// sessionEntry is one node_instance session. lock (capacity 1) is held by
// the execution using the session, so turns never overlap; id is the
// harness session id once a turn returned one; lost (guarded by the
// table's mu) is set when an execution using it ended unclean or its run
// was closed, and stays set; used is set once an execution ended clean
// with it, so later ones continue its conversation; thread (guarded by
// lock) is the session's cumulative usage.
type sessionEntry struct {
	lock   chan struct{}
	id     string
	lost   bool
	used   bool
	thread Usage
}

// sessionTable holds the node_instance sessions of every run. An entry is
// created by the first execution of a node instance and reused, with its
// session id, by every later one. A lost entry is never replaced: every
// later checkout fails. closeRun drops a run's entries.
type sessionTable struct {
	mu sync.Mutex
	m  map[sessionKey]*sessionEntry
}

// checkout waits until the entry is free (or ctx ends) and returns it held.
func (t *sessionTable) checkout(ctx context.Context, k sessionKey) (*sessionEntry, error) {
	t.mu.Lock()
	if t.m == nil {
		t.m = map[sessionKey]*sessionEntry{}
	}
	e, ok := t.m[k]
	if !ok {
		e = &sessionEntry{lock: make(chan struct{}, 1)}
		t.m[k] = e
	}
	t.mu.Unlock()
	select {
	case e.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	t.mu.Lock()
	lost := e.lost
	t.mu.Unlock()
	if lost {
		<-e.lock
		return nil, errSessionLost
	}
	return e, nil
}

// release frees a held entry. A clean end keeps id (when not empty) for the
// next execution; an unclean one marks the session lost.
func (t *sessionTable) release(e *sessionEntry, id string, clean bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !clean {
		e.lost = true
	} else {
		e.used = true
		if id != "" {
			e.id = id
		}
	}
	<-e.lock
}

// closeRun marks every session of the run lost and forgets them.
func (t *sessionTable) closeRun(run string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.m {
		if k.run == run {
			e.lost = true
			delete(t.m, k)
		}
	}
}
