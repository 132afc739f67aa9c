package templates

import (
	"slices"

	"github.com/oecp/oecp/graph"
)

// Limits the templates' executables declare.
const (
	// agentTimeoutMs is an agent node's timeoutMs: one hour, as the
	// reference's templates.
	agentTimeoutMs = 60 * 60 * 1000
	// prTimeoutMs bounds a pull request delivery: commit, push, and the
	// first observation of the opened pull request.
	prTimeoutMs = 10 * 60 * 1000
	// shipTimeoutMs bounds a merge delivery, which also waits for the
	// checks: delivery's 90 observations 20 s apart (30 minutes) plus the
	// push, with room to spare.
	shipTimeoutMs = 45 * 60 * 1000
)

// policy is the graphs' policy binding, the one every example uses.
var policy = graph.PolicyBinding{Policy: "policy.default@1", Default: graph.PolicyDefaultDeny}

// agentWorker is an agent node's worker reference: a graph-local name
// (the runtime plan decides what runs it), agent.<node>@1 by convention.
func agentWorker(node string) string { return "agent." + node + "@1" }

func str() graph.PayloadType  { return graph.PayloadType{Kind: graph.PayloadString} }
func null() graph.PayloadType { return graph.PayloadType{Kind: graph.PayloadNull} }

// record is a record of required string fields.
func record(fields ...string) graph.PayloadType {
	t := graph.PayloadType{Kind: graph.PayloadRecord, Fields: map[string]graph.RecordField{}}
	for _, f := range fields {
		t.Fields[f] = graph.RecordField{Type: str(), Required: true}
	}
	return t
}

// enum is a required enum field's type.
func enum(values ...string) graph.PayloadType {
	return graph.PayloadType{Kind: graph.PayloadEnum, Values: slices.Sorted(slices.Values(values))}
}

// fromState binds each field of an executable's input (or a succeed's
// output) to the state field of the same name.
func fromState(fields ...string) []graph.InputBinding {
	out := make([]graph.InputBinding, len(fields))
	for i, f := range fields {
		out[i] = graph.InputBinding{Target: graph.FieldPath{f}, Value: graph.DataSelector{Source: graph.SourceState, Path: graph.FieldPath{f}}}
	}
	return out
}

// write writes channel path of node into the state field target.
func write(node string, channel graph.OutputChannel, path, target string) graph.WriteBinding {
	return graph.WriteBinding{Value: graph.NodeOutputSelector{Node: node, Channel: channel, Path: graph.FieldPath{path}}, Target: graph.FieldPath{target}}
}

// paths are single-field state paths.
func paths(fields ...string) []graph.FieldPath {
	out := make([]graph.FieldPath, len(fields))
	for i, f := range fields {
		out[i] = graph.FieldPath{f}
	}
	return out
}

// agentStep is an agent step with instructions that reads the named state
// fields and answers {summary}, which it writes to state.
func agentStep(name, instructions string, reads ...string) *graph.Step {
	return &graph.Step{
		Name: name, Worker: agentWorker(name), Instructions: &instructions,
		Input: record(reads...), Output: record(fieldSummary),
		InputBindings: fromState(reads...),
		WriteBindings: []graph.WriteBinding{write(name, graph.ChannelOut, fieldSummary, fieldSummary)},
		TimeoutMs:     agentTimeoutMs, Attempts: 1,
	}
}

// agentVerifier is an agent verifier with instructions that reads the
// named state fields, outputs null, signals verdict accepted|rejected and
// writes its diagnostic message to the state field feedback.
func agentVerifier(name, instructions, feedback string, reads ...string) *graph.Verifier {
	return &graph.Verifier{
		Name: name, Worker: agentWorker(name), Instructions: &instructions,
		Input: record(reads...), Output: null(),
		InputBindings: fromState(reads...),
		WriteBindings: []graph.WriteBinding{write(name, graph.ChannelDiagnostic, "message", feedback)},
		TimeoutMs:     agentTimeoutMs, Attempts: 1,
		Signals:    map[string][]string{signalVerdict: {verdictAccepted, verdictRejected}},
		Diagnostic: record("message"),
	}
}

// signal is the control selector of one of node's signal fields.
func signal(node, field string) *graph.ControlSelector {
	return &graph.ControlSelector{Name: node, Source: graph.ControlSignal, Field: &field}
}

// in is the guard "the selected control holds one of labels".
func in(sel *graph.ControlSelector, labels ...string) graph.Guard {
	return graph.Guard{Kind: graph.GuardIn, Value: sel, Labels: slices.Sorted(slices.Values(labels))}
}

func all(gs ...graph.Guard) graph.Guard   { return graph.Guard{Kind: graph.GuardAll, Guards: gs} }
func anyOf(gs ...graph.Guard) graph.Guard { return graph.Guard{Kind: graph.GuardAny, Guards: gs} }

// errorCauses are the error codes of an executable and the word a fail
// reason gives each: crash (the agent could not start, or its CLI failed:
// no provider, a driver error), refusal (its credential was refused or is
// missing, or a policy denied it), timeout (its timeoutMs passed), and
// malformed (it never answered in the contract's shape).
var errorCauses = []struct{ code, word string }{
	{"crash", "crashed"},
	{"refusal", "refused"},
	{"timeout", "timed_out"},
	{"malformed", "malformed"},
}

// failReason is the fail reason of node ending with error code.
func failReason(node, code string) string {
	for _, c := range errorCauses {
		if c.code == code {
			return node + "_" + c.word
		}
	}
	return node + "_failed"
}

// failed is the guard "node ended with any error".
func failed(node string) graph.Guard {
	codes := make([]string, len(errorCauses))
	for i, c := range errorCauses {
		codes[i] = c.code
	}
	return in(&graph.ControlSelector{Name: node, Source: graph.ControlError}, codes...)
}

// errorRoutes are one choice branch per error code of node, each to a
// fail node whose reason names the node and the cause.
func errorRoutes(node string) []graph.ChoiceBranch {
	out := make([]graph.ChoiceBranch, len(errorCauses))
	for i, c := range errorCauses {
		reason := failReason(node, c.code)
		out[i] = graph.ChoiceBranch{
			When: in(&graph.ControlSelector{Name: node, Source: graph.ControlError}, c.code),
			Node: &graph.Fail{Name: reason, Reason: reason},
		}
	}
	return out
}
