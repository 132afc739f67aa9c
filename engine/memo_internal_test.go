package engine

import (
	"encoding/json"
	"testing"

	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/graph"
)

// TestRunMemoStartsFreshOnAnOlderHistory: a run's memo only ever sees
// histories that extend each other. A settlement reduces the history with
// its outcome before its write commits; a reconcile pass may then reduce
// an older history (a snapshot read before the commit, or the write
// failed), which holds fewer ended executions: it gets a fresh memo, and a
// history that extends the last one keeps it.
func TestRunMemoStartsFreshOnAnOlderHistory(t *testing.T) {
	g, err := graph.Decode([]byte(`{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":{"policy":"p@1","default":"deny"},"root":{"kind":"step","name":"s","worker":"w@1","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":1000,"attempts":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	x := func(state reduce.ExecutionState) reduce.Execution {
		return reduce.Execution{Execution: 1, State: state}
	}
	active := reduce.History{Executions: []reduce.Execution{x(reduce.StateActive)}}
	settled := reduce.History{Executions: []reduce.Execution{x(reduce.StateSettled)}}
	var r runMemo
	reduceWith := func(h reduce.History) *reduce.Memo {
		_, _ = r.reduce(g, json.RawMessage("null"), h, true) // the result does not matter here
		return r.m
	}
	first := reduceWith(active)
	if reduceWith(active) != first || reduceWith(settled) != first {
		t.Fatal("a history that extends the last one got a fresh memo")
	}
	if reduceWith(active) == first {
		t.Fatal("an older history (fewer ended executions) was reduced with the memo of a newer one")
	}
}
