package cluster

import (
	"context"
	"sync"

	"github.com/oecp/oecp/engine"
)

// listing is what the change feed last listed.
type listing struct {
	mu   sync.Mutex
	runs map[engine.RunRef]bool
}

// Changes names every running cluster run, and every run listed by the
// previous call that is no longer running (engine.ChangeFeed). A tenant
// has at most one running run, so this costs what the tenants running a
// run do, and it never depends on runs queued elsewhere.
func (l *Ledger) Changes(ctx context.Context) ([]engine.RunRef, bool, error) {
	runs, err := l.Running(ctx)
	if err != nil {
		return nil, false, err
	}
	now := make(map[engine.RunRef]bool, len(runs))
	for _, ref := range runs {
		now[ref] = true
	}
	l.listed.mu.Lock()
	defer l.listed.mu.Unlock()
	for ref := range l.listed.runs {
		if !now[ref] {
			runs = append(runs, ref)
		}
	}
	l.listed.runs = now
	return runs, false, nil
}
