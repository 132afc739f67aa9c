package reduce

import (
	"encoding/json"

	"github.com/oecp/oecp/graph"
)

// ReduceNative is Reduce in the native mode of native runs: there are no
// automatic re-dispatches and no holds. Every dispatch is attempt 1 (each
// visit of an occurrence is one execution, matched to history by dispatch
// order), and a worker error that no guard reads still sets the node's
// `error` control and lets the flow continue, so a run always reaches a
// terminal without an operator retry. Retry grants are never part of a
// native history.
func ReduceNative(g *graph.GraphSpec, initialInput json.RawMessage, h History) (Result, error) {
	if len(h.Grants) > 0 {
		return Result{}, errf(ErrInconsistentHistory, "a native history has no retry grants")
	}
	return reduce(g, initialInput, h, true, nil)
}

// budget is the number of attempts one visit of n may dispatch: one in
// native mode, else the node's attempts plus the visit's retry grants.
func (e *evaluator) budget(n execNode, v *visit) uint64 {
	if e.native {
		return 1
	}
	return max(n.attempts, 1) + v.grants
}
