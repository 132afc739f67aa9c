package runs

import (
	"context"
	"errors"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
)

// Harnesses is what the host configured for its agent harnesses (the
// `--harness` file).
type Harnesses interface {
	// CheckPlan refuses a runtime plan whose harness ("codex" or
	// "claude") the host has not configured, naming the host setting, or
	// whose agent bindings declare an environment name the harness entry
	// does not list. nodes are the plan's agent bindings by node name.
	CheckPlan(harness string, nodes map[string]Binding) error
}

// Agents runs agent nodes: the host's harness drivers behind a small
// consumer-side port, so that this package never knows how a prompt is
// rendered or a provider process started.
type Agents interface {
	Harnesses
	// RunAgent runs one execution of an agent-bound node, or of a
	// git_delivery-bound one when the host has Workspaces, to its
	// outcome. It must return when ctx is done (cancellation or the
	// node's timeout); the supervisor decides what a cancelled outcome
	// means.
	RunAgent(ctx context.Context, a AgentExecution) worker.Outcome
}

// Workspaces is the host's git workspaces (oecp serve --repos FILE).
// Without it a run's source is only recorded and git delivery is refused.
type Workspaces interface {
	// CheckSource refuses at submit a source whose repository the host
	// does not serve to the tenant.
	CheckSource(tenant string, src Source) error
	// CheckDelivery refuses a git_delivery-bound node that does not
	// declare the delivery contract.
	CheckDelivery(node graph.Node) error
	// Prepare makes the run's workspace: a clone of src at exactly its
	// revision. No execution of the run starts before it returned nil; an
	// error fails the run (ErrRevisionNotFound: revision_not_found,
	// anything else: runtime_unavailable). It runs again for an
	// unfinished run after a restart and must then keep a workspace it
	// already made.
	Prepare(ctx context.Context, tenant, runID string, src Source) error
}

// WorkspaceKeeper is implemented by Workspaces that can tell whether this
// host holds a run's prepared workspace. A run whose executions already
// started elsewhere (another replica, or this host before its data
// directory was lost) and whose workspace is not here cannot go on: its
// agents' work lived in that workspace, so the run ends runtime_lost
// instead of starting over on a fresh clone.
type WorkspaceKeeper interface {
	Prepared(tenant, runID string, src Source) bool
}

// ErrRevisionNotFound is the Prepare error of a source revision the
// repository does not have.
var ErrRevisionNotFound = errors.New("source revision not found")

// RunCloser is implemented by Agents that keep per-run state (sessions):
// CloseRun is called once a run has finished.
type RunCloser interface {
	CloseRun(tenant, runID string)
}

// AgentExecution is one dispatch of an agent-bound node.
type AgentExecution struct {
	// RunID and the tenant key scope sessions and workspaces.
	Tenant string
	RunID  string
	// Harness and Provider come from the run's runtime plan; Binding is
	// the node's own entry (model, effort, session scope, env names, or
	// git delivery).
	Harness  string
	Provider string
	Binding  Binding
	// Source is the run's source.
	Source Source
	// Node is the step or verifier being executed; its instructions and
	// declared types form the agent's turn contract.
	Node graph.Node
	// NodeInstance is stable across loop revisits of one structural
	// occurrence (a node_instance session scope reuses its session);
	// Execution is fresh per dispatch.
	NodeInstance uint64
	Execution    uint64
	// Worker carries the execution ref, input and live output sinks, as
	// for any worker.
	Worker worker.Execution
	// Spending keeps the run's reported agent cost in its record.
	Spending Spending
}
