package reduce

import (
	"errors"
	"testing"
)

func (x Execution) interrupt(pos uint64) Execution {
	x.State, x.Position = StateInterrupted, pos
	return x
}

// TestInterruptedExecutionIsDispatchedAgain: an execution cancelled by a
// graceful shutdown is no attempt. The same attempt is dispatched again
// with a fresh execution id on the same node instance, in either mode, and
// the run then goes on as if the interruption never happened.
func TestInterruptedExecutionIsDispatchedAgain(t *testing.T) {
	g := mustGraph(t, wrap(seq("root", "", step("a", "", `[`+write("a", "out", "echo", "r")+`]`, 2), succeed("done", `[`+bind("r", "state", "r")+`]`))))
	in := raw(`{"r":""}`)
	first := ex(1, 1, 2, "a", nil, 1, `null`)
	cases := []struct {
		name    string
		native  bool
		h       []Execution
		attempt uint64
	}{
		{"first attempt", false, []Execution{first.interrupt(3)}, 1},
		{"second attempt", false, []Execution{first.settle(3, failed("crash")), ex(2, 1, 4, "a", nil, 2, `null`).interrupt(5)}, 2},
		{"twice", false, []Execution{first.interrupt(3), ex(2, 1, 4, "a", nil, 1, `null`).interrupt(5)}, 1},
		{"native", true, []Execution{first.interrupt(3)}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reduce := Reduce
			if c.native {
				reduce = ReduceNative
			}
			h := History{Executions: c.h}
			r, err := reduce(g, in, h)
			if err != nil {
				t.Fatal(err)
			}
			next := uint64(len(c.h) + 1)
			ds := r.Dispatches()
			if len(ds) != 1 || ds[0].Attempt != c.attempt || ds[0].Execution != next || ds[0].NodeInstance != 1 {
				t.Fatalf("decisions %s", decisionsJSON(t, r.Decisions))
			}
			h.Executions = append(h.Executions, ex(next, 1, 10, "a", nil, c.attempt, `null`).settle(11, verified(`{"echo":"again"}`)))
			r, err = reduce(g, in, h)
			if err != nil {
				t.Fatal(err)
			}
			if r.Terminal == nil || outcomeJSON(t, r.Terminal) != `{"output":{"r":"again"},"status":"succeeded"}` {
				t.Fatalf("decisions %s", decisionsJSON(t, r.Decisions))
			}
		})
	}
}

// TestInterruptedExecutionIsNoFailure: a retry grant cannot name an
// interrupted execution, and an interruption is recorded after its
// dispatch.
func TestInterruptedExecutionIsNoFailure(t *testing.T) {
	g := mustGraph(t, wrap(seq("root", "", step("a", "", "", 1), succeed("done", ""))))
	x := ex(1, 1, 2, "a", nil, 1, `null`)
	for _, h := range []History{
		{Executions: []Execution{x.interrupt(3)}, Grants: []RetryGrant{{Execution: 1}}},
		{Executions: []Execution{x.interrupt(2)}},
	} {
		if _, err := Reduce(g, raw(`{}`), h); !errors.Is(err, ErrInconsistentHistory) {
			t.Fatalf("err = %v, want inconsistent history", err)
		}
	}
}
