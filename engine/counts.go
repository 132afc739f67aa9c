package engine

import (
	"maps"
	"unsafe"

	"github.com/oecp/oecp/engine/reduce"
)

// nodeCounts counts a run's executions per node over the first n of its
// History.Ended, which a ledger only ever appends to: a later snapshot
// with the same Ended slice counts only what was appended since.
type nodeCounts struct {
	ended *reduce.Execution
	n     int
	m     map[string]int
}

// executionCounts returns the number of executions of each node in
// snap's history (the caller's to change).
func (s *Supervisor) executionCounts(snap *Snapshot) map[string]int {
	h := snap.History
	c := s.counts[snap.Ref]
	if c == nil || c.ended != unsafe.SliceData(h.Ended) || c.n > len(h.Ended) {
		c = &nodeCounts{m: map[string]int{}}
		s.counts[snap.Ref] = c
	}
	for _, e := range h.Ended[c.n:] {
		c.m[e.Occurrence.Node]++
	}
	c.ended, c.n = unsafe.SliceData(h.Ended), len(h.Ended)
	out := maps.Clone(c.m)
	for _, e := range h.Executions {
		out[e.Occurrence.Node]++
	}
	return out
}
