package reduce

import (
	"errors"
	"fmt"
)

// Reducer errors. Every error Reduce returns wraps exactly one of these
// sentinels; its Error text is the snake_case failure reason the supervisor
// should record when it terminalises the run (see FailureReason).
var (
	// ErrInconsistentHistory: the history contradicts the graph:
	// duplicate ids, an unknown occurrence, a recorded input that differs from
	// the recomputed one, an outcome of the wrong kind, an execution the
	// evaluation never visits, an unclaimed void, a malformed attempt chain.
	ErrInconsistentHistory = errors.New("inconsistent_history")
	// ErrIdentityOutOfRange: an id or position is 0 or a fresh id would
	// exceed MaxIdentity.
	ErrIdentityOutOfRange = errors.New("identity_out_of_range")
	// ErrMissingSelectedValue: a selector path, map item or output channel
	// did not resolve.
	ErrMissingSelectedValue = errors.New("missing_selected_value")
	// ErrInvalidDurableValue: a map's `over` is not an array, or a write goes
	// through a non-object.
	ErrInvalidDurableValue = errors.New("invalid_durable_value")
	// ErrMissingChoiceRoute: no choice branch matched and there is no
	// `otherwise`.
	ErrMissingChoiceRoute = errors.New("missing_choice_route")
	// ErrEncoding: a recorded value (input, output, diagnostic) is not JSON.
	ErrEncoding = errors.New("encoding")
	// ErrInvalidGraph: the graph is not one the reducer can run (nil nodes,
	// duplicate names, unknown kinds). Verified graphs never hit it.
	ErrInvalidGraph = errors.New("invalid_graph")
	// ErrRootCompleted: the root finished normally without reaching a
	// succeed or fail node; the verifier rejects such graphs.
	ErrRootCompleted = errors.New("root_completed_without_terminal")
)

var sentinels = []error{
	ErrInconsistentHistory, ErrIdentityOutOfRange, ErrMissingSelectedValue,
	ErrInvalidDurableValue, ErrMissingChoiceRoute, ErrEncoding, ErrInvalidGraph,
	ErrRootCompleted,
}

// FailureReason maps an error returned by Reduce to the reason of the failed
// run the supervisor should write (a reducer error terminalises the run
// explicitly instead of leaving it non-terminal). Unknown errors give
// "reducer_error".
func FailureReason(err error) string {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "reducer_error"
}

func errf(kind error, format string, args ...any) error {
	return fmt.Errorf("reduce: %w: %s", kind, fmt.Sprintf(format, args...))
}
