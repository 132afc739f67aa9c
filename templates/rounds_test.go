package templates_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/templates"
)

// agents answers the executions of a template run: by node, the outcome
// of each of its executions in turn (the last one repeats).
type agents map[string][]reduce.Outcome

// trace is a run driven to its end: the terminal, and every execution in
// settling order with its input.
type trace struct {
	terminal *reduce.Terminal
	ran      []string
	inputs   map[string][]json.RawMessage
}

// run materialises a template with delivery d and drives it on the native
// reducer the way the supervisor does (voids, then the terminal, then
// every dispatch, else the oldest execution settles), the agents
// answering.
func run(t *testing.T, name string, d templates.Delivery, task string, answers agents) trace {
	t.Helper()
	tpl, err := templates.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	g, err := tpl.Graph(d)
	if err != nil {
		t.Fatal(err)
	}
	input, err := templates.TaskInput(g, task)
	if err != nil {
		t.Fatal(err)
	}
	var h reduce.History
	tr := trace{inputs: map[string][]json.RawMessage{}}
	seen := map[string]int{}
	var pos uint64
	for range 1000 {
		r, err := reduce.ReduceNative(g, input, h)
		if err != nil {
			t.Fatalf("reduce after %v: %v", tr.ran, err)
		}
		if len(r.Voids()) > 0 {
			t.Fatalf("voids %v: the templates' joins wait for every branch", r.Voids())
		}
		if r.Terminal != nil {
			tr.terminal = r.Terminal
			return tr
		}
		if ds := r.Dispatches(); len(ds) > 0 {
			for _, x := range ds {
				pos++
				h.Executions = append(h.Executions, reduce.Execution{DispatchPosition: pos, NodeInstance: x.NodeInstance,
					Execution: x.Execution, Occurrence: x.Occurrence, Attempt: x.Attempt, Input: x.Input, State: reduce.StateActive})
			}
			continue
		}
		i := slices.IndexFunc(h.Executions, func(x reduce.Execution) bool { return x.State == reduce.StateActive })
		if i < 0 {
			t.Fatalf("no progress after %v", tr.ran)
		}
		x := &h.Executions[i]
		node := x.Occurrence.Node
		outs := answers[node]
		if len(outs) == 0 {
			t.Fatalf("%s ran, with no answer for it (after %v)", node, tr.ran)
		}
		o := outs[min(seen[node], len(outs)-1)]
		seen[node]++
		pos++
		x.State, x.Position, x.Outcome = reduce.StateSettled, pos, &o
		tr.ran = append(tr.ran, node)
		tr.inputs[node] = append(tr.inputs[node], x.Input)
	}
	t.Fatalf("the run did not end: %v", tr.ran)
	return tr
}

func wrote(summary string) reduce.Outcome {
	return reduce.Outcome{Status: reduce.OutcomeVerified, Output: json.RawMessage(fmt.Sprintf(`{"summary":%q}`, summary))}
}

func verdict(label, message string) reduce.Outcome {
	return reduce.Outcome{Status: reduce.OutcomeVerifier, Output: json.RawMessage(`null`), Signals: map[string]string{"verdict": label},
		Diagnostic: json.RawMessage(fmt.Sprintf(`{"message":%q}`, message))}
}

func failure(code, reason string) reduce.Outcome {
	return reduce.Outcome{Status: reduce.OutcomeError, Code: code, Reason: reason}
}

// delivered is a delivery receipt with outcome label.
func delivered(mode, label, message string) reduce.Outcome {
	receipt := fmt.Sprintf(`{"version":"v1","mode":%q,"outcome":%q,"repository":"acme/app","targetBranch":"main","headRevision":"%s","pullRequestId":"7"}`,
		mode, label, strings.Repeat("a", 40))
	return reduce.Outcome{Status: reduce.OutcomeVerifier, Output: json.RawMessage(receipt), Signals: map[string]string{"delivery": label},
		Diagnostic: json.RawMessage(fmt.Sprintf(`{"message":%q}`, message))}
}

func (tr trace) succeeded(t *testing.T, output string) {
	t.Helper()
	if tr.terminal.Status != reduce.TerminalSucceeded || string(tr.terminal.Output) != output {
		t.Fatalf("terminal %+v (output %s), want succeeded with %s; ran %v", tr.terminal, tr.terminal.Output, output, tr.ran)
	}
}

func (tr trace) failed(t *testing.T, reason string) {
	t.Helper()
	if tr.terminal.Status != reduce.TerminalFailed || tr.terminal.Reason != reason {
		t.Fatalf("terminal %+v, want failed %s; ran %v", tr.terminal, reason, tr.ran)
	}
}

func (tr trace) ranExactly(t *testing.T, nodes ...string) {
	t.Helper()
	// The verifiers of one round settle in either order.
	got := slices.Clone(tr.ran)
	for i := 0; i+1 < len(got); i++ {
		if got[i] == "code" && got[i+1] == "acceptance" {
			got[i], got[i+1] = got[i+1], got[i]
		}
	}
	if !slices.Equal(got, nodes) {
		t.Fatalf("ran %v, want %v", tr.ran, nodes)
	}
}

// inputHas fails t unless the input of node's execution i (from 0)
// contains want.
func (tr trace) inputHas(t *testing.T, node string, i int, want string) {
	t.Helper()
	if in := string(tr.inputs[node][i]); !strings.Contains(in, want) {
		t.Fatalf("input %d of %s is %s, want it to contain %s", i, node, in, want)
	}
}

const task = "Add a `--dry-run` flag.\n\nIt prints \"what would change\" & exits 0."

// TestSoftwareChangeRejectedOnceRepairsAndReviewsAgain: the code verifier
// rejects the first change; the repair agent gets the task, the change's
// summary and both verifiers' feedback; both verifiers judge the repaired
// change, accept it, and the run succeeds with the repair's summary.
func TestSoftwareChangeRejectedOnceRepairsAndReviewsAgain(t *testing.T) {
	tr := run(t, templates.SoftwareChange, templates.DeliveryNone, task, agents{
		"implement":  {wrote("added the flag")},
		"acceptance": {verdict("accepted", "Accepted: the flag is there.")},
		"code":       {verdict("rejected", "Rejected: no test for --dry-run."), verdict("accepted", "Accepted: tested.")},
		"repair":     {wrote("added the flag and its test")},
	})
	tr.succeeded(t, `{"summary":"added the flag and its test"}`)
	tr.ranExactly(t, "implement", "acceptance", "code", "repair", "acceptance", "code")
	var in map[string]string
	if err := json.Unmarshal(tr.inputs["repair"][0], &in); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"task": task, "summary": "added the flag", "acceptanceFeedback": "Accepted: the flag is there.",
		"codeFeedback": "Rejected: no test for --dry-run."}
	if fmt.Sprint(in) != fmt.Sprint(want) {
		t.Fatalf("repair input %v, want %v", in, want)
	}
	tr.inputHas(t, "code", 1, `"summary":"added the flag and its test"`) // what the second review judged
}

// TestSoftwareChangeOpensPullRequest: with --pr, two accepted verdicts
// lead to the delivery, and the run succeeds with the pull request.
func TestSoftwareChangeOpensPullRequest(t *testing.T) {
	tr := run(t, templates.SoftwareChange, templates.DeliveryPR, task, agents{
		"implement":  {wrote("added the flag")},
		"acceptance": {verdict("accepted", "Accepted.")},
		"code":       {verdict("accepted", "Accepted.")},
		"deliver":    {delivered("pr", "opened", "pull request #7 is open")},
	})
	tr.succeeded(t, `{"pullRequest":"7","summary":"added the flag"}`)
	tr.ranExactly(t, "implement", "acceptance", "code", "deliver")
}

// TestSoftwareChangeShipFeedsDeliveryFailureBack: with --ship, a merge
// stopped by failed checks goes to the delivery repair agent with the
// delivery's reason, then to another review and delivery, which merges.
func TestSoftwareChangeShipFeedsDeliveryFailureBack(t *testing.T) {
	tr := run(t, templates.SoftwareChange, templates.DeliveryShip, task, agents{
		"implement":       {wrote("added the flag")},
		"acceptance":      {verdict("accepted", "Accepted.")},
		"code":            {verdict("accepted", "Accepted.")},
		"deliver":         {delivered("merge", "ci_failed", "check lint failed: unused variable"), delivered("merge", "merged", "merged")},
		"delivery_repair": {wrote("added the flag; removed an unused variable")},
	})
	tr.succeeded(t, `{"pullRequest":"7","summary":"added the flag; removed an unused variable"}`)
	tr.ranExactly(t, "implement", "acceptance", "code", "deliver", "delivery_repair", "acceptance", "code", "deliver")
	tr.inputHas(t, "delivery_repair", 0, `"deliveryFeedback":"check lint failed: unused variable"`)
}

// TestSoftwareChangeGivesUpAfterTenRounds: a change the verifiers never
// accept fails change_attempts_exhausted after ten reviews.
func TestSoftwareChangeGivesUpAfterTenRounds(t *testing.T) {
	tr := run(t, templates.SoftwareChange, templates.DeliveryPR, task, agents{
		"implement":  {wrote("v1")},
		"acceptance": {verdict("rejected", "Rejected: not it.")},
		"code":       {verdict("accepted", "Accepted.")},
		"repair":     {wrote("again")},
	})
	tr.failed(t, "change_attempts_exhausted")
	reviews := 0
	for _, n := range tr.ran {
		if n == "acceptance" {
			reviews++
		}
	}
	if reviews != 10 {
		t.Fatalf("%d reviews, want 10: %v", reviews, tr.ran)
	}
}

// TestAgentErrorEndsTheRunWithItsCause: an agent that cannot start
// (crash), whose credential is refused (refusal), that times out or never
// answers in shape (malformed) ends the run at once, failed with a reason
// naming the node and the cause: no other agent runs after it, in
// particular no further review round.
func TestAgentErrorEndsTheRunWithItsCause(t *testing.T) {
	reject := verdict("rejected", "Rejected.")
	accept := verdict("accepted", "Accepted.")
	for _, tc := range []struct {
		template string
		d        templates.Delivery
		answers  agents
		reason   string
		ran      []string
	}{
		{templates.SingleWorker, templates.DeliveryNone, agents{"worker": {failure("refusal", "authentication_required")}}, "worker_refused", []string{"worker"}},
		{templates.SoftwareChange, templates.DeliveryNone, agents{"implement": {failure("crash", "declared_failure")}}, "implement_crashed", []string{"implement"}},
		{templates.SoftwareChange, templates.DeliveryPR, agents{"implement": {wrote("v1")}, "acceptance": {failure("refusal", "authentication_required")}, "code": {accept}},
			"acceptance_refused", []string{"implement", "acceptance", "code"}},
		{templates.SoftwareChange, templates.DeliveryPR, agents{"implement": {wrote("v1")}, "acceptance": {reject}, "code": {failure("malformed", "malformed_result")}},
			"code_malformed", []string{"implement", "acceptance", "code"}},
		{templates.SoftwareChange, templates.DeliveryPR, agents{"implement": {wrote("v1")}, "acceptance": {reject}, "code": {accept}, "repair": {failure("crash", "declared_failure")}},
			"repair_crashed", []string{"implement", "acceptance", "code", "repair"}},
		{templates.SoftwareChange, templates.DeliveryPR, agents{"implement": {wrote("v1")}, "acceptance": {reject, accept}, "code": {accept},
			"repair": {wrote("v2")}, "deliver": {failure("refusal", "authentication_required")}},
			"deliver_refused", []string{"implement", "acceptance", "code", "repair", "acceptance", "code", "deliver"}},
		{templates.SoftwareChange, templates.DeliveryShip, agents{"implement": {wrote("v1")}, "acceptance": {accept}, "code": {accept},
			"deliver": {delivered("merge", "conflict", "conflict in main.go")}, "delivery_repair": {failure("timeout", "declared_failure")}},
			"delivery_repair_timed_out", []string{"implement", "acceptance", "code", "deliver", "delivery_repair"}},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			tr := run(t, tc.template, tc.d, task, tc.answers)
			tr.failed(t, tc.reason)
			tr.ranExactly(t, tc.ran...)
		})
	}
}

// TestSingleWorkerSucceedsWithSummary: the worker's summary is the run's
// output.
func TestSingleWorkerSucceedsWithSummary(t *testing.T) {
	tr := run(t, templates.SingleWorker, templates.DeliveryNone, task, agents{"worker": {wrote("done it")}})
	tr.succeeded(t, `{"summary":"done it"}`)
	if in := string(tr.inputs["worker"][0]); in != `{"task":"Add a `+"`--dry-run`"+` flag.\n\nIt prints \"what would change\" & exits 0."}` {
		t.Fatalf("worker input %s", in)
	}
}
