package templates

import "github.com/oecp/oecp/graph"

// nodeWorker is single-worker's one agent node.
const nodeWorker = "worker"

// singleWorker is one agent step that carries out the task, then a choice
// that fails with the agent's error, or succeeds with its summary.
//
//	seq main
//	  step worker                         task → summary
//	  choice outcome
//	    worker error (each code)  → fail worker_<cause>
//	    otherwise                 → succeed done {summary}
func singleWorker() *graph.GraphSpec {
	return agentFirst(record(fieldTask, fieldSummary), nodeWorker, workerInstructions, "outcome", done(fieldSummary))
}

// agentFirst is a template's graph over state: the agent node on the
// task, then a choice that fails on the node's error codes and otherwise
// goes on with then.
func agentFirst(state graph.PayloadType, node, instructions, choice string, then graph.Node) *graph.GraphSpec {
	return &graph.GraphSpec{
		Profile:      graph.ProfileFull,
		InitialInput: state,
		Policy:       policy,
		Root: &graph.Seq{
			Name: "main", State: state, PromotedStatePaths: paths(),
			Children: []graph.Node{
				agentStep(node, instructions, fieldTask),
				&graph.Choice{
					Name: choice, State: state, PromotedStatePaths: paths(),
					Branches:  errorRoutes(node),
					Otherwise: then,
				},
			},
		},
	}
}

// done is the succeed node of a template: its output is the named state
// fields.
func done(fields ...string) *graph.Succeed {
	return &graph.Succeed{Name: "done", Output: record(fields...), Bindings: fromState(fields...)}
}
