package reduce

import (
	"errors"
	"testing"
)

// workedExample writes a draft, has it reviewed and routes on the
// verdict; with routeErrors a guard also reads the review's error.
func workedExample(routeErrors bool) string {
	branches := []string{branch(inG("review", "signal", "verdict", "accepted"),
		succeed("done", `[`+bind("draft", "state", "draft")+`]`))}
	if routeErrors {
		branches = append(branches, branch(inG("review", "error", "", "timeout", "crash", "malformed", "refusal"), fail("reviewFailed", "review_failed")))
	}
	return wrap(seq("root", "",
		step("write", `[`+bind("task", "state", "task")+`]`, `[`+write("write", "out", "text", "draft")+`]`, 1),
		verifier("review", `[`+bind("draft", "state", "draft")+`]`, `[`+write("review", "diagnostic", "message", "feedback")+`]`,
			`{"verdict":["accepted","rejected"]}`, 1),
		choice("route", "", fail("rejected", "review_rejected"), branches...),
	))
}

const exampleInput = `{"task":"Haiku about rain","draft":"","feedback":""}`

func TestWorkedExampleTrace(t *testing.T) {
	g := mustGraph(t, workedExample(false))
	e1 := ex(1, 1, 2, "write", nil, 1, `{"task":"Haiku about rain"}`)
	e1s := e1.settle(3, verified(`{"text":"Soft rain on tin"}`))
	e2 := ex(2, 2, 4, "review", nil, 1, `{"draft":"Soft rain on tin"}`)
	e2s := e2.settle(5, verdict(`null`, map[string]string{"verdict": "accepted"}, `{"message":"Vivid."}`))

	const (
		dispatchWrite  = `{"attempt":1,"execution":1,"input":{"task":"Haiku about rain"},"kind":"dispatch","node_instance":1,"occurrence":{"mapIndices":[],"node":"write"},"timeout_ms":1000,"worker":"w.write@1"}`
		promoteWrite   = `{"kind":"promote","map_indices":[],"node":"write","values":[{"path":["draft"],"value":"Soft rain on tin"}]}`
		continueWrite  = `{"kind":"continue","node":"write"}`
		dispatchReview = `{"attempt":1,"execution":2,"input":{"draft":"Soft rain on tin"},"kind":"dispatch","node_instance":2,"occurrence":{"mapIndices":[],"node":"review"},"timeout_ms":1000,"worker":"w.review@1"}`
		promoteReview  = `{"kind":"promote","map_indices":[],"node":"review","values":[{"path":["feedback"],"value":"Vivid."}]}`
		continueReview = `{"kind":"continue","node":"review"}`
		terminal       = `{"kind":"terminal","projection":{"output":{"draft":"Soft rain on tin"},"status":"succeeded"}}`
	)
	steps := []struct {
		name string
		h    []Execution
		want string
	}{
		{"R1", nil, `[` + dispatchWrite + `]`},
		{"R2", []Execution{e1}, `[]`},
		{"R3", []Execution{e1s}, `[` + promoteWrite + `,` + continueWrite + `,` + dispatchReview + `]`},
		{"R4", []Execution{e1s, e2}, `[` + promoteWrite + `,` + continueWrite + `]`},
		{"R5", []Execution{e2s, e1s}, `[` + promoteWrite + `,` + continueWrite + `,` + promoteReview + `,` + continueReview + `,` + terminal + `]`},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			r, err := Reduce(g, raw(exampleInput), History{Executions: s.h})
			if err != nil {
				t.Fatal(err)
			}
			if got := decisionsJSON(t, r.Decisions); got != s.want {
				t.Errorf("decisions\n got %s\nwant %s", got, s.want)
			}
		})
	}

	// The same run through Simulate reaches the same terminal and history.
	term, h, err := Simulate(g, raw(exampleInput), func(d Dispatch) Outcome {
		if d.Occurrence.Node == "write" {
			return *verified(`{"text":"Soft rain on tin"}`)
		}
		return *verdict(`null`, map[string]string{"verdict": "accepted"}, `{"message":"Vivid."}`)
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := term.MarshalJSON(); string(b) != `{"output":{"draft":"Soft rain on tin"},"status":"succeeded"}` {
		t.Errorf("simulated terminal %s", b)
	}
	if len(h.Executions) != 2 || h.Executions[1].DispatchPosition != 3 {
		t.Errorf("simulated history %+v", h.Executions)
	}
}

func TestWorkedExampleVariants(t *testing.T) {
	e1 := ex(1, 1, 2, "write", nil, 1, `{"task":"Haiku about rain"}`)
	e1s := e1.settle(3, verified(`{"text":"Soft rain on tin"}`))
	e2 := ex(2, 2, 4, "review", nil, 1, `{"draft":"Soft rain on tin"}`)
	cases := []struct {
		name        string
		routeErrors bool
		h           History
		want        string // JSON of decisions, or "" when wantErr
		wantErr     error
	}{
		{name: "rejected", h: History{Executions: []Execution{e1s, e2.settle(5, verdict(`null`, map[string]string{"verdict": "rejected"}, `{"message":"Flat."}`))}},
			want: `[{"kind":"promote","map_indices":[],"node":"write","values":[{"path":["draft"],"value":"Soft rain on tin"}]},{"kind":"continue","node":"write"},` +
				`{"kind":"promote","map_indices":[],"node":"review","values":[{"path":["feedback"],"value":"Flat."}]},{"kind":"continue","node":"review"},` +
				`{"kind":"terminal","projection":{"reason":"review_rejected","status":"failed"}}]`},
		// An unrouted exhausted failure holds the run.
		{name: "verifier errors, unrouted: hold", h: History{Executions: []Execution{e1s, e2.settle(5, failed("timeout"))}},
			want: `[{"kind":"promote","map_indices":[],"node":"write","values":[{"path":["draft"],"value":"Soft rain on tin"}]},{"kind":"continue","node":"write"},` +
				`{"attempt":1,"code":"timeout","execution":2,"kind":"hold","node_instance":2,"occurrence":{"mapIndices":[],"node":"review"}}]`},
		// A guard reads review.error: the error is routed.
		{name: "verifier errors, routed", routeErrors: true, h: History{Executions: []Execution{e1s, e2.settle(5, failed("timeout"))}},
			want: `[{"kind":"promote","map_indices":[],"node":"write","values":[{"path":["draft"],"value":"Soft rain on tin"}]},{"kind":"continue","node":"write"},` +
				`{"kind":"continue","node":"review"},{"kind":"terminal","projection":{"reason":"review_failed","status":"failed"}}]`},
		{name: "step errors, unrouted: hold", h: History{Executions: []Execution{e1.settle(3, failed("crash"))}},
			want: `[{"attempt":1,"code":"crash","execution":1,"kind":"hold","node_instance":1,"occurrence":{"mapIndices":[],"node":"write"}}]`},
		{name: "retry grant re-dispatches attempt 2", h: History{Executions: []Execution{e1.settle(3, failed("crash"))}, Grants: []RetryGrant{{1}, {1}}},
			want: `[{"attempt":2,"execution":2,"input":{"task":"Haiku about rain"},"kind":"dispatch","node_instance":1,"occurrence":{"mapIndices":[],"node":"write"},"timeout_ms":1000,"worker":"w.write@1"}]`},
		{name: "tampered input", h: History{Executions: []Execution{e1s, ex(2, 2, 4, "review", nil, 1, `{"draft":"other"}`)}}, wantErr: ErrInconsistentHistory},
		{name: "surplus execution", h: History{Executions: []Execution{e1s, e2, ex(3, 1, 6, "write", nil, 1, `{"task":"Haiku about rain"}`)}}, wantErr: ErrInconsistentHistory},
		{name: "outcome kind mismatch", h: History{Executions: []Execution{e1.settle(3, verdict(`{}`, nil, `null`))}}, wantErr: ErrInconsistentHistory},
		{name: "grant of a success", h: History{Executions: []Execution{e1s}, Grants: []RetryGrant{{1}}}, wantErr: ErrInconsistentHistory},
		{name: "attempt 2 without a failure", h: History{Executions: []Execution{e1s, ex(2, 1, 4, "write", nil, 2, `{"task":"Haiku about rain"}`)}}, wantErr: ErrInconsistentHistory},
		{name: "attempt beyond budget", h: History{Executions: []Execution{e1.settle(3, failed("crash")), ex(2, 1, 4, "write", nil, 2, `{"task":"Haiku about rain"}`)}}, wantErr: ErrInconsistentHistory},
		{name: "unclaimed void", h: History{Executions: []Execution{e1.void(3, VoidParallelJoin)}}, wantErr: ErrInconsistentHistory},
		{name: "zero id", h: History{Executions: []Execution{ex(0, 1, 2, "write", nil, 1, `{}`)}}, wantErr: ErrIdentityOutOfRange},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := mustGraph(t, workedExample(c.routeErrors))
			r, err := Reduce(g, raw(exampleInput), c.h)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err = %v, want %v", err, c.wantErr)
				}
				if FailureReason(err) != c.wantErr.Error() {
					t.Errorf("FailureReason = %q", FailureReason(err))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := decisionsJSON(t, r.Decisions); got != c.want {
				t.Errorf("decisions\n got %s\nwant %s", got, c.want)
			}
		})
	}
}
