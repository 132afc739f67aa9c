package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
)

// exitErr ends a command with an exit status. run writes its text to
// stderr, then exits with code.
type exitErr struct {
	code int
	text string // whole lines for stderr; "" when everything was said already
}

func (e *exitErr) Error() string { return strings.TrimSuffix(e.text, "\n") }

// exitWith ends a command with code and nothing more to say.
func exitWith(code int) *exitErr { return &exitErr{code: code} }

// failf ends command cmd with code after the line "oecp CMD: MESSAGE".
func failf(cmd string, code int, format string, a ...any) *exitErr {
	return &exitErr{code: code, text: fmt.Sprintf("oecp %s: %s\n", cmd, fmt.Sprintf(format, a...))}
}

// hint adds an indented line (or lines) saying what to do next.
func (e *exitErr) hint(s string) *exitErr {
	e.text += "  " + s + "\n"
	return e
}

// exitCode reports err, what a command returned, on stderr and returns the
// process exit status: 0 for nil and for flag.ErrHelp (the usage was
// printed), an exitErr's code, else exitError.
func exitCode(err error, stderr io.Writer) int {
	var e *exitErr
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &e):
		_, _ = io.WriteString(stderr, e.text)
		return e.code
	}
	fmt.Fprintf(stderr, "oecp: %v\n", err)
	return exitError
}

// failf ends the command with code after "oecp NAME: MESSAGE".
func (c *cli) failf(code int, format string, a ...any) *exitErr {
	return failf(c.name, code, format, a...)
}

// usageErr reports a usage problem (exit 2).
func (c *cli) usageErr(format string, a ...any) *exitErr {
	return c.failf(exitUsage, format, a...)
}

// localError marks a problem found before talking to the server (exit 2).
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// failGraph is fail for plan and apply: the protocol answers an
// undecodable graph with a bare SCHEMA_VIOLATION, so the CLI decodes the
// file with the same strict decoder to say where the problem is.
func (c *cli) failGraph(err error, file string, data []byte) *exitErr {
	e := c.fail(err)
	var se *client.Error
	if errors.As(err, &se) && se.DataCode == protocol.SchemaViolation && len(se.Details) == 0 {
		if _, derr := graph.Decode(data); derr != nil {
			e.hint(fmt.Sprintf("%s: %v", file, derr))
		}
	}
	return e
}

// fail reports err with what to do next: a server refusal exits 1, so does
// an interruption; a refused URL or token, a local problem or a connection
// failure exits 2.
func (c *cli) fail(err error) *exitErr {
	var se *client.Error
	switch {
	case errors.As(err, &se):
		e := c.failf(exitError, "the server refused the request: %s", describeServerError(se))
		if hint := serverHint(c.name, se); hint != "" {
			e.hint(hint)
		}
		return e
	case errors.Is(err, client.ErrURLRefused):
		return c.usageErr("%v", err).hint(fmt.Sprintf("Use a ws:// or wss:// URL with a host and no credentials, query or fragment (e.g. %s);\n  plaintext ws:// to a non-loopback host needs --allow-plaintext.", defaultServerURL))
	case errors.Is(err, client.ErrUnauthorized):
		return c.usageErr("%v", err).hint("Check the token given with --token-file or OECP_TOKEN: it may be missing, unknown to the server, or expired.")
	case errors.Is(err, context.Canceled):
		return c.failf(exitError, "interrupted")
	}
	var le *localError
	if errors.As(err, &le) {
		return c.usageErr("%v", err)
	}
	return c.usageErr("cannot talk to the server at %s: %v", c.server, err).hint("Is `oecp serve` running there? Start it, or point --server / OECP_SERVER at the right URL.")
}

func describeServerError(e *client.Error) string {
	s := e.Message
	if e.DataCode != "" {
		s += " (" + e.DataCode + ")"
	} else {
		s += fmt.Sprintf(" (code %d)", e.Code)
	}
	var reason string
	if e.Detail("reason", &reason) {
		s += ": " + reason
	} else if len(e.Details) > 0 && string(e.Details) != "null" && e.DataCode != protocol.GraphInvalid {
		s += " " + string(e.Details)
	}
	return s
}

// serverHint says what to do next after a server error.
func serverHint(cmd string, e *client.Error) string {
	switch e.DataCode {
	case protocol.GenerationConflict:
		var g any
		e.Detail("currentGeneration", &g)
		return fmt.Sprintf("The cluster is at generation %v, not the one sent: check `oecp get` and retry (or pass --if-generation).", jsonString(g))
	case protocol.RunConflict:
		var r any
		e.Detail("currentRunId", &r)
		return fmt.Sprintf("The current run is %v, not the one sent: check `oecp get` and retry (or pass --if-run).", jsonString(r))
	case protocol.InvalidPhase:
		var phase, dispatch string
		e.Detail("currentPhase", &phase)
		e.Detail("dispatchState", &dispatch)
		switch {
		case phase == protocol.PhaseFinished && cmd == "apply":
			return "The cluster's run has finished: `oecp delete` it before applying a graph, or `oecp resubmit` to run the same graph again."
		case phase == protocol.PhaseRunning && cmd == "apply":
			return "A run is in progress: a changed graph is accepted only while the run is held on a failure; `oecp stop` it (or wait for it to finish, then `oecp delete`)."
		case phase == protocol.PhaseEmpty:
			return "The cluster is empty (see `oecp get`): `oecp apply -f GRAPH --input JSON` starts a run."
		case dispatch == protocol.DispatchSuspended:
			return "The run is suspended: `oecp update --resume` first."
		}
		return "The cluster's current state does not allow " + cmd + " now: see `oecp get`."
	case protocol.IdempotencyReuse:
		return "This --idempotency-key was already used for a different request: use a new key (or omit it)."
	case protocol.GraphInvalid:
		var diags []json.RawMessage
		e.Detail("diagnostics", &diags)
		var b strings.Builder
		for _, d := range diags {
			b.WriteString(formatDiagnostic(d))
			b.WriteString("\n  ")
		}
		return b.String() + "Fix the graph; `oecp plan -f FILE` shows these diagnostics without applying."
	case protocol.SchemaViolation:
		return "The request does not fit the protocol schema: check the graph file, --input and the flags."
	case protocol.NotFound:
		return "Nothing with that id exists: check the run id or execution with `oecp get` / `oecp watch`."
	case protocol.Gone:
		return "It was deleted or is no longer active."
	case protocol.NoRetryableFrontier:
		return "There is no failed step to retry now (see the reason above; `oecp watch` shows the run's events)."
	case protocol.ServerBusy:
		return "The server is at its per-connection limit: try again shortly."
	case protocol.Cancelled:
		return "The request was cancelled before it committed: retry it with the same --idempotency-key."
	}
	if e.Code == protocol.CodeInternalError {
		return "The server failed internally: check its log."
	}
	return ""
}

func jsonString(v any) string {
	if v == nil {
		return "none"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
