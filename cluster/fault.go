package cluster

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
)

// fault is a BackendFault, the body of a watch fault event. It is
// descriptive only: it never authorizes a retry or changes a run's
// terminal semantics.
type fault struct {
	EventID      string        `json:"eventId"`
	ExecutionRef string        `json:"executionRef,omitempty"`
	Code         string        `json:"code"`
	Consequence  string        `json:"consequence"`
	Retry        string        `json:"retry"`
	Action       string        `json:"action"`
	Severity     string        `json:"severity"`
	Summary      string        `json:"summary"`
	Source       []faultSource `json:"source"`
}

// faultSource is one frame of a fault's source.
type faultSource struct {
	Component string `json:"component"`
}

// errInvalidFault: a fault breaks a bound or an enumeration of the
// BackendFault shape; it is not recorded.
var errInvalidFault = errors.New("cluster: invalid fault")

func oneOf(v string, set ...string) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}

// encode validates the fault's bounds and enumerations and encodes it in
// wire order: eventId and summary are 1..256 characters without controls,
// retry action never pairs with not_retryable, at most
// protocol.MaxFaultSourceFrames source frames, at most
// protocol.MaxFaultEncodedBytes encoded.
func (f fault) encode() (json.RawMessage, error) {
	bad := func(what string) error { return fmt.Errorf("%w: %s", errInvalidFault, what) }
	switch {
	case !graph.IsBoundedString256(f.EventID), !graph.IsBoundedString256(f.Summary):
		return nil, bad("eventId/summary must be 1..256 characters without controls")
	case f.ExecutionRef != "" && protocol.ValidExecutionRef(f.ExecutionRef) != nil:
		return nil, bad("executionRef is invalid")
	case !oneOf(f.Code, "unavailable", "resource_exhausted", "deadline_exceeded", "permission_denied", "failed_precondition", "not_found", "aborted", "internal", "unknown"):
		return nil, bad("code")
	case !oneOf(f.Consequence, "turn_failed", "run_failed", "run_degraded", "no_observable_effect"):
		return nil, bad("consequence")
	case !oneOf(f.Retry, "retryable", "retryable_after_backoff", "not_retryable", "indeterminate"):
		return nil, bad("retry")
	case !oneOf(f.Action, "none", "retry", "wait", "escalate", "abort"):
		return nil, bad("action")
	case f.Action == "retry" && f.Retry == "not_retryable":
		return nil, bad("action retry with not_retryable")
	case !oneOf(f.Severity, "info", "warning", "error", "critical"):
		return nil, bad("severity")
	case len(f.Source) > protocol.MaxFaultSourceFrames:
		return nil, bad("too many source frames")
	}
	for _, s := range f.Source {
		if !graph.IsBoundedString256(s.Component) {
			return nil, bad("source component")
		}
	}
	if f.Source == nil {
		f.Source = []faultSource{}
	}
	raw, err := protocol.Marshal(f)
	if err != nil {
		return nil, err
	}
	if len(raw) > protocol.MaxFaultEncodedBytes {
		return nil, bad(fmt.Sprintf("exceeds %d encoded bytes", protocol.MaxFaultEncodedBytes))
	}
	return raw, nil
}

// faultEvent is the watch event of f.
func faultEvent(f fault) (protocol.WatchEvent, error) {
	raw, err := f.encode()
	return protocol.WatchEvent{Type: protocol.EventFault, Fault: raw}, err
}

// engineFault is a fault the engine's ledger records about one execution:
// code aborted, source oecp-engine.
func engineFault(id, ref, consequence, retry, action, severity, summary string) fault {
	return fault{EventID: id, ExecutionRef: ref, Code: "aborted", Consequence: consequence, Retry: retry,
		Action: action, Severity: severity, Summary: summary, Source: []faultSource{{Component: "oecp-engine"}}}
}
