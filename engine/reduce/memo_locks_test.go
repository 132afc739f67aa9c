package reduce

import (
	"testing"
	"time"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/internal/testkit"
)

// A memo's index lock is never waited for under its cache lock: building
// the index takes the cache lock under the index lock, so while an index
// is being built a reduction beginning on a new graph must leave the
// cache lock free.
func TestMemoBeginNeverWaitsForTheIndexUnderItsCacheLock(t *testing.T) {
	m := &Memo{}
	m.idxMu.Lock() // an index being built
	begun := make(chan struct{})
	go func() {
		m.begin(&graph.GraphSpec{}, nil, History{})
		close(begun)
	}()
	free := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if m.mu.TryLock() { // what the index build takes next
			started := m.g != nil // begin took the cache lock
			m.mu.Unlock()
			select {
			case <-begun:
			default:
				free = started // and left it, waiting for the index lock
			}
			if free {
				break
			}
		}
	}
	m.idxMu.Unlock()
	testkit.Recv(t, begun)
	if !free {
		t.Fatal("begin held the memo's cache lock while waiting for its index lock")
	}
}
