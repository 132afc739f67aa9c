package reduce

import (
	"errors"
	"testing"
)

// settled is one settled execution of occurrence node (no map indices).
func settled(node string, ni, ex, at, end uint64, o *Outcome) Execution {
	return Execution{DispatchPosition: at, NodeInstance: ni, Execution: ex, Occurrence: Occurrence{Node: node},
		Attempt: 1, Input: raw(`null`), State: StateSettled, Position: end, Outcome: o}
}

// TestNativeUnroutedErrorContinues: an error no guard reads holds a legacy
// run, while the native mode sets the error control and moves on.
func TestNativeUnroutedErrorContinues(t *testing.T) {
	g := mustGraph(t, wrap(seq("root", "", step("a", "", "", 1), step("b", "", "", 1), succeed("done", ""))))
	h := History{Executions: []Execution{settled("a", 1, 1, 1, 2, failed("crash"))}}
	legacy, err := Reduce(g, raw(`null`), h)
	if err != nil {
		t.Fatal(err)
	}
	if len(legacy.Holds()) != 1 || len(legacy.Dispatches()) != 0 {
		t.Fatalf("legacy: %s", decisionsJSON(t, legacy.Decisions))
	}
	native, err := ReduceNative(g, raw(`null`), h)
	if err != nil {
		t.Fatal(err)
	}
	ds := native.Dispatches()
	if len(native.Holds()) != 0 || len(ds) != 1 || ds[0].Occurrence.Node != "b" || ds[0].Attempt != 1 {
		t.Fatalf("native: %s", decisionsJSON(t, native.Decisions))
	}
}

// TestNativeLoopRevisitIsAttemptOne: a loop revisit is a fresh execution
// of the same node instance at attempt 1, and a native history never has
// retry grants.
func TestNativeLoopRevisitIsAttemptOne(t *testing.T) {
	g := mustGraph(t, wrap(loop("l", "", step("a", "", "", 1), "", 3)))
	h := History{Executions: []Execution{settled("a", 1, 1, 1, 2, failed("timeout"))}}
	r, err := ReduceNative(g, raw(`null`), h)
	if err != nil {
		t.Fatal(err)
	}
	ds := r.Dispatches()
	if len(ds) != 1 || ds[0].Attempt != 1 || ds[0].NodeInstance != 1 || ds[0].Execution != 2 {
		t.Fatalf("native loop: %s", decisionsJSON(t, r.Decisions))
	}
	h.Grants = []RetryGrant{{Execution: 1}}
	if _, err := ReduceNative(g, raw(`null`), h); !errors.Is(err, ErrInconsistentHistory) {
		t.Fatalf("grant in a native history: %v", err)
	}
}
