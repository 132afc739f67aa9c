package main

import (
	"fmt"
	"strings"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/protocol"
)

// explain says in plain words why the server refused command cmd, and
// what to do about it ("" when nothing useful can be said).
func explain(cmd string, e *client.Error) (why, todo string) {
	if why, todo, ok := explainRun(e); ok && strings.HasPrefix(cmd, "run ") {
		return why, todo
	}
	switch e.DataCode {
	case protocol.InvalidPhase:
		return explainPhase(cmd, e)
	case protocol.NoRetryableFrontier:
		var reason string
		e.Detail("reason", &reason)
		switch reason {
		case "active":
			return "a step is still running", "wait for it to end (`oecp watch` follows it)"
		case "success":
			return "the last step succeeded, so there is nothing to retry", ""
		case "consumed":
			return "that failure was already retried", "its next attempt starts (or has started): `oecp watch` follows it"
		}
		return "nothing has failed that can be retried", "`oecp watch` shows the run's steps"
	case protocol.GenerationConflict:
		var g any
		e.Detail("currentGeneration", &g)
		return fmt.Sprintf("the cluster is at generation %s, not the one expected", jsonString(g)), "check `oecp get`, then run the command again (--if-generation pins the generation)"
	case protocol.RunConflict:
		var r any
		e.Detail("currentRunId", &r)
		return fmt.Sprintf("the current run is %s, not the one expected", jsonString(r)), "check `oecp get`, then run the command again (--if-run pins the run)"
	case protocol.SchemaViolation:
		var reason string
		if e.Detail("reason", &reason) {
			return reason, "" // the server's own rule, in its words
		}
	}
	if p, ok := plainRefusals[e.DataCode]; ok {
		return p[0], p[1]
	}
	if e.Code == protocol.CodeInternalError {
		return "the server failed internally", "check its log"
	}
	return e.Message, ""
}

// plainRefusals are why and what to do for the refusals whose details add
// nothing to say.
var plainRefusals = map[string][2]string{
	protocol.IdempotencyReuse: {"this --idempotency-key was already used for a different request", "use a new key (or omit it)"},
	protocol.GraphInvalid:     {"the graph does not verify", ""},
	protocol.SchemaViolation:  {"the request does not fit the protocol", "check the graph file, --input and the flags"},
	protocol.NotFound:         {"no such run, cursor or execution", "check the run id, cursor or execution with `oecp get` / `oecp watch`"},
	protocol.Gone:             {"it was deleted or is no longer active", ""},
	protocol.ServerBusy:       {"the server is at its per-connection limit", "try again shortly"},
	protocol.Cancelled:        {"the request was cancelled before it committed", "run it again with the same --idempotency-key"},
	// The store (its database) is down or restarting: retryable, not a
	// failure of the server to look into.
	protocol.StoreUnavailable: {"the server's store (its database) is unavailable right now; nothing was changed", "retry in a moment (with the same --idempotency-key, if you gave one)"},
}

// explainPhase explains INVALID_PHASE: the cluster's phase (or, for
// retry, the run's dispatch state) does not allow cmd, or the backend
// lacks the method.
func explainPhase(cmd string, e *client.Error) (why, todo string) {
	if what, ok := strings.CutPrefix(e.Message, "Backend does not support "); ok {
		return "the server's backend does not support " + what, "a `oecp serve --backend fixture` server has no engine (no runs, logs or attach): serve the default backend"
	}
	if strings.HasPrefix(e.Message, "Backend does not ") {
		return "the server's backend " + strings.TrimPrefix(e.Message, "Backend "), ""
	}
	var phase, dispatch string
	e.Detail("currentPhase", &phase)
	e.Detail("dispatchState", &dispatch)
	switch {
	case phase == protocol.PhaseDeleting:
		return "the cluster is being deleted", "wait for the delete to complete (`oecp get` shows it)"
	case phase == protocol.PhaseEmpty, dispatch == protocol.DispatchStopped:
		return "there is no run", "`oecp apply -f GRAPH --input JSON` starts one"
	case dispatch == protocol.DispatchSuspended:
		return "the run is suspended", "`oecp update --resume` first"
	case dispatch != "":
		return "the run is stopping", "wait for it to finish (`oecp watch`)"
	case phase == protocol.PhaseFinished:
		return finishedRefusal(cmd)
	}
	return runningRefusal(cmd)
}

// finishedRefusal: cmd was refused because the run has finished.
func finishedRefusal(cmd string) (why, todo string) {
	switch cmd {
	case "apply":
		return "the cluster's run has finished", "`oecp delete` it before applying another graph, or `oecp resubmit` to run the same graph again"
	case "retry":
		return "the run has finished", "`oecp resubmit` runs the graph again"
	case "stop":
		return "the run has already finished", "there is nothing to stop"
	}
	return "the run has finished", "`oecp get` shows how it ended"
}

// runningRefusal: cmd was refused because the run is still running (or,
// for update and stop, already stopping).
func runningRefusal(cmd string) (why, todo string) {
	switch cmd {
	case "apply":
		return "the cluster's run is still running", "a changed graph replaces a run only while it is held on a failed step and active; " +
			"`oecp stop` it first (or wait for it to finish, then `oecp delete`); a suspended run needs `oecp update --resume`"
	case "delete":
		return "the run is still running", "`oecp stop` it first"
	case "resubmit":
		return "the run is still running", "`oecp stop` it first, or wait for it to finish"
	case "update", "stop":
		return "the run is stopping", "wait for it to finish (`oecp watch`)"
	}
	return "the run is still running", "see `oecp get`"
}
