package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
	"github.com/spf13/pflag"
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
// process exit status: 0 for nil and for pflag.ErrHelp (the usage was
// printed), an exitErr's code, else exitError.
func exitCode(err error, stderr io.Writer) int {
	var e *exitErr
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
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

// usageErr ends the command with exit 2 for a problem with what it was
// given: an unreadable file or value, a refused URL or token, a failed
// dial. A bad flag or flag combination is c.fs.usageErr, which adds the
// hint to the command's help.
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
		return c.refused(se)
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
	e := c.usageErr("cannot talk to the server at %s: %v", c.server, err).hint(dialHint(c.server, err))
	switch {
	case c.serverFrom == serverFromTarget:
		e.hint(fmt.Sprintf("That is the URL of the current target, %s ('oecp target list'; 'oecp target use --none' goes back to the default address).", c.target))
	case c.serverFrom == serverFromDefault && !c.autoServer:
		e.hint("'oecp run …', 'oecp apply' and 'oecp plan' start a local server there when none answers.")
	}
	return e
}

// dialHint says what to do after a failed dial: trust the server's
// certificate, use wss:// for a TLS port, or start the server.
func dialHint(server string, err error) string {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &hostname), strings.Contains(err.Error(), "x509:"), strings.Contains(err.Error(), "tls:"):
		return "The TLS handshake failed: if the server's certificate comes from a private CA, pass that CA with --ca-file FILE\n  (and dial the name or address the certificate was issued for)."
	case strings.HasPrefix(server, "ws://") && strings.Contains(err.Error(), "HTTP 400"):
		return "A ws:// URL to a port that serves TLS answers HTTP 400: if the server runs with --tls-cert, use wss:// (with --ca-file for a private CA)."
	}
	return "Is `oecp serve` running there? Start it, or point --server / OECP_SERVER at the right URL."
}

// refused reports a server error: the CLI's own first line says which
// command was refused, why in plain words and what to do; the protocol's
// code and details follow (its message text is fixed per code, e.g.
// "Cluster phase does not admit apply" for every phase refusal, so it is
// shown only where it says more than the code).
func (c *cli) refused(e *client.Error) *exitErr {
	why, todo := explain(c.name, e)
	line := why
	if todo != "" {
		line += " — " + todo
	}
	x := &exitErr{code: exitError, text: fmt.Sprintf("oecp %s refused: %s\n", c.name, line)}
	x.hint("(" + describeServerError(e) + ")")
	if more := serverHint(c.name, e); more != "" {
		x.hint(more)
	}
	if more := c.localHint(e); more != "" {
		x.hint(more)
	}
	return x
}

// describeServerError renders the protocol's side of a refusal: the data
// code (or JSON-RPC code) and its details.
func describeServerError(e *client.Error) string {
	var s string
	switch {
	case e.DataCode == protocol.InvalidPhase && isPhaseMessage(e.Message):
		s = "server: " + e.DataCode // the message is fixed and misleading; the details say it all
	case e.DataCode != "":
		s = "server: " + e.Message + ", " + e.DataCode
	default:
		s = fmt.Sprintf("server: %s, code %d", e.Message, e.Code)
	}
	var phase, dispatch, reason string
	switch {
	case e.Detail("currentPhase", &phase):
		s += ", phase " + phase
	case e.Detail("dispatchState", &dispatch):
		s += ", dispatch " + dispatch
	case e.Detail("reason", &reason):
		s += ": " + reason
	case len(e.Details) > 0 && string(e.Details) != "null" && e.DataCode != protocol.GraphInvalid:
		s += " " + string(e.Details)
	}
	return s
}

func isPhaseMessage(m string) bool {
	return m == protocol.MsgInvalidPhase || m == protocol.MsgDispatchDenied
}

// serverHint adds what only the server's details can say: the graph's
// diagnostics (a run command's refusal has said what to do already).
func serverHint(cmd string, e *client.Error) string {
	if e.DataCode != protocol.GraphInvalid {
		return ""
	}
	var diags []json.RawMessage
	e.Detail("diagnostics", &diags)
	var b strings.Builder
	for _, d := range diags {
		b.WriteString(formatDiagnostic(d))
		b.WriteString("\n  ")
	}
	if strings.HasPrefix(cmd, "run ") {
		return strings.TrimSuffix(b.String(), "\n  ")
	}
	return b.String() + "Fix the graph; `oecp plan -f FILE` shows these diagnostics without applying."
}

func jsonString(v any) string {
	if v == nil {
		return "none"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
